"""A KernelBench file's module constants, evaluated from its syntax tree with bounds: literals, names assigned
above, tuples and lists, and arithmetic on them. Never `eval`: `9 ** 9 ** 9`, `'a' * 10 ** 10` or `1 << 10 ** 10`
would take minutes and gigabytes before any timer could stop them, so each operation is refused before it is
done where its result would pass a bound."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

MAX_INT_BITS = 256  # sizes and shapes: far past any tensor's, far below a slow big integer
MAX_ITEMS = 10_000  # a string's characters, a tuple's or list's items
MAX_DEPTH = 50  # nested operations in one expression

Value = Any


class ConstantRefused(Exception):
    """An expression past a bound: the message says which."""


class Unknown(Exception):
    """An expression this evaluator does not do (a call, an attribute): the constant is left out, not refused."""


BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
    ast.Not: operator.not_,
}


def evaluate(node: ast.expr, known: dict[str, Value]) -> Value:
    """The value of `node`, with `known` names; Unknown where it is not plain arithmetic on constants,
    ConstantRefused where it is but passes a bound."""
    return _value(node, known, 0)


def _value(node: ast.expr, known: dict[str, Value], depth: int) -> Value:
    if depth > MAX_DEPTH:
        raise ConstantRefused(f"nested more than {MAX_DEPTH} operations deep")
    if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float, str)):
        return _checked(node.value)
    if isinstance(node, ast.Name):
        if node.id not in known:
            raise Unknown(node.id)
        return known[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        if len(node.elts) > MAX_ITEMS:
            raise ConstantRefused(f"more than {MAX_ITEMS} items")
        items = [_value(e, known, depth + 1) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        return _checked(UNARY[type(node.op)](_value(node.operand, known, depth + 1)))
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        left, right = _value(node.left, known, depth + 1), _value(node.right, known, depth + 1)
        if isinstance(node.op, ast.Mod) and isinstance(left, str):
            raise Unknown("string formatting")  # '%*d' % (10 ** 9, 1): a width is a size too; not done here
        _refuse_if_large(node.op, left, right)
        try:
            return _checked(BINARY[type(node.op)](left, right))
        except (ArithmeticError, TypeError, ValueError) as exc:
            raise Unknown(str(exc)) from None
    raise Unknown(type(node).__name__)


def _refuse_if_large(op: ast.operator, left: Value, right: Value) -> None:
    """Refuses, before it is computed, an operation whose result would pass the bounds."""
    power = isinstance(op, ast.Pow) and _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1
    if power and right * math.log2(abs(left)) > MAX_INT_BITS:
        raise ConstantRefused(f"a power past {MAX_INT_BITS} bits")
    if isinstance(op, ast.LShift) and _is_int(left) and _is_int(right) and left and right > MAX_INT_BITS:
        raise ConstantRefused(f"a shift past {MAX_INT_BITS} bits")
    if isinstance(op, ast.Mult):
        sequence, count = (left, right) if isinstance(left, (str, tuple, list)) else (right, left)
        if isinstance(sequence, (str, tuple, list)) and _is_int(count) and len(sequence) * count > MAX_ITEMS:
            raise ConstantRefused(f"a repeat past {MAX_ITEMS} items")


def _is_int(value: Value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _checked(value: Value) -> Value:
    if _is_int(value) and value.bit_length() > MAX_INT_BITS:
        raise ConstantRefused(f"an integer past {MAX_INT_BITS} bits")
    if isinstance(value, (str, tuple, list)) and _items(value, MAX_ITEMS + 1) > MAX_ITEMS:
        raise ConstantRefused(f"more than {MAX_ITEMS} items")
    return value


def _items(value: Value, stop: int) -> int:
    """Characters and items in `value`, nested ones included (`[[1] * 9999] * 9999` holds one list many times,
    and is written out whole), counted up to `stop`."""
    if isinstance(value, str):
        return len(value)
    if not isinstance(value, (tuple, list)):
        return 1
    count = len(value)
    for item in value:
        if count >= stop:
            break
        count += _items(item, stop - count)
    return count
