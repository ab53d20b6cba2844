"""bf16 arithmetic and TF32 dots for the Triton interpreter, which stores bf16 as raw uint16 bit patterns.

Triton 3.6-3.9's interpreter computes `tl.dot`, elementwise math, comparisons and reductions on
those bit patterns as if they were integers, so an honest bf16 kernel gets wrong answers on a
machine with no GPU (triton issue #11584). Here every such operation widens bf16 operands to
float32, computes, and rounds back to bf16 (nearest even), as the GPU does. Only operands whose
Triton dtype is bf16 are touched; everything else runs the interpreter's own code.

Proton's region marks (in-kernel timing) become no-ops: the interpreter cannot run them. Triton's own @jit
helpers, made at import by a template that imported Triton to compile, run interpreted.

`tl.dot` on fp32 operands runs at TF32 on the GPU unless input_precision says otherwise; the interpreter
computed it in full fp32, so a version whose error holds only at fp32 passed with no GPU. Its operands now
lose what a tensor core's TF32 read loses.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np


def widen(data: np.ndarray) -> np.ndarray:
    return (np.asarray(data).astype(np.uint32) << 16).view(np.float32)


def narrow(data: Any) -> np.ndarray:
    """float32 -> bf16 bit patterns, rounding to nearest even; NaN stays NaN."""
    values = np.asarray(data, dtype=np.float32)
    bits = values.view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(0x7FC0), rounded)


def tf32(data: np.ndarray) -> np.ndarray:
    """fp32 as a tensor core reads it at TF32: the lower 13 mantissa bits ignored (PTX mma/wgmma .tf32)."""
    bits = np.ascontiguousarray(data, dtype=np.float32).view(np.uint32)
    return (bits & np.uint32(0xFFFFE000)).view(np.float32)


def at_tf32(precision: Any) -> bool:
    """tl.dot's input_precision (an enum in the interpreter): TF32 alone, not TF32x3 (three dots, near fp32)."""
    return str(precision).rsplit(".", 1)[-1].lower() == "tf32"


def install() -> bool:
    """Patches the interpreter in this process; False where its internals are not as expected."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter as interp
    except ImportError:
        return False
    _jit_functions_interpreted()
    builder = getattr(interp, "InterpreterBuilder", None)
    handle_cls = getattr(interp, "TensorHandle", None)
    reduce_ops = getattr(interp, "ReduceOps", None)
    if builder is None or handle_cls is None:
        return False

    def is_bf16(handle: Any) -> bool:
        return getattr(getattr(handle, "dtype", None), "scalar", None) == tl.bfloat16 and (
            getattr(handle, "data", None) is not None and handle.data.dtype == np.uint16
        )

    def as_f32(handle: Any) -> Any:
        return handle_cls(widen(handle.data), tl.float32) if is_bf16(handle) else handle

    def back(result: Any) -> Any:
        if result.data.dtype == np.bool_ or result.dtype.scalar != tl.float32:
            return result
        return handle_cls(narrow(result.data), tl.bfloat16)

    original_binary, original_unary = builder.binary_op, builder.unary_op
    original_dot, original_fma = builder.create_dot, getattr(builder, "create_fma", None)

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if is_bf16(lhs) or is_bf16(rhs):
            return back(original_binary(self, as_f32(lhs), as_f32(rhs), op))
        return original_binary(self, lhs, rhs, op)

    def unary_op(self: Any, arg: Any, op: Any) -> Any:
        if is_bf16(arg):
            return back(original_unary(self, as_f32(arg), op))
        return original_unary(self, arg, op)

    def create_dot(self: Any, a: Any, b: Any, d: Any, *args: Any, **kwargs: Any) -> Any:
        if is_bf16(a) or is_bf16(b) or is_bf16(d):
            result = original_dot(self, as_f32(a), as_f32(b), as_f32(d), *args, **kwargs)
            return back(result) if is_bf16(d) else result
        if at_tf32(args[0] if args else kwargs.get("input_precision")):
            a, b = as_tf32(a), as_tf32(b)
        return original_dot(self, a, b, d, *args, **kwargs)

    def as_tf32(handle: Any) -> Any:
        if getattr(getattr(handle, "data", None), "dtype", None) != np.float32:
            return handle
        return handle_cls(tf32(handle.data), handle.dtype.scalar)

    builder.binary_op = binary_op
    builder.unary_op = unary_op
    builder.create_dot = create_dot
    if original_fma is not None:

        def create_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
            if is_bf16(x) or is_bf16(y) or is_bf16(z):
                return back(original_fma(self, as_f32(x), as_f32(y), as_f32(z)))
            return original_fma(self, x, y, z)

        builder.create_fma = create_fma
    if reduce_ops is not None:
        _patch_reductions(reduce_ops, tl)
    _proton_marks_as_no_ops()
    return True


def _jit_functions_interpreted() -> None:
    """Triton's own @jit helpers (tl.standard's sum, max, softmax, cdiv; tl.random) are made at import, as
    JITFunction where the worker's template imported Triton to compile: called from an interpreted kernel they
    raise "outside of the scope of a kernel". Each is run as the InterpretedFunction an import under the
    interpreter would have made of it, so one template serves interpreted and compiling workers alike."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        interpreted = self.__dict__.get("_interpreted")
        if interpreted is None:
            interpreted = self.__dict__["_interpreted"] = InterpretedFunction(self.fn)
        return interpreted(*args, **kwargs)

    JITFunction.__call__ = call


def _proton_marks_as_no_ops() -> None:
    """Region marks for proton's in-kernel timing (pl.scope, pl.enter_scope, harness.worker.regions) need the
    compiler, which the interpreter has not: they time nothing here, so a version that marks regions still runs."""
    try:
        import triton.profiler.language as pl
    except ImportError:
        return

    def unmarked(*args: Any, **kwargs: Any) -> None:
        return None

    for name in ("enter_scope", "exit_scope"):
        if hasattr(pl, name):
            setattr(pl, name, unmarked)
    if hasattr(pl, "scope"):
        pl.scope = _UnmarkedScope


class _UnmarkedScope(contextlib.nullcontext[None]):
    """`with pl.scope("name"):` in an interpreted kernel: nothing to time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()


def _patch_reductions(reduce_ops: Any, tl: Any) -> None:
    original_apply = reduce_ops.apply_impl

    def apply_impl(self: Any, inputs: Any) -> Any:
        if not any(t.dtype.scalar == tl.bfloat16 for t in inputs):
            return original_apply(self, inputs)
        widened = tuple(
            self.to_tensor(widen(t.handle.data), tl.float32) if t.dtype.scalar == tl.bfloat16 else t for t in inputs
        )
        result = original_apply(self, widened)
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        was_bf16 = [t.dtype.scalar == tl.bfloat16 for t in inputs]
        narrowed = [
            self.to_tensor(narrow(r.handle.data), tl.bfloat16)
            if i < len(was_bf16) and was_bf16[i] and r.dtype.scalar == tl.float32
            else r
            for i, r in enumerate(results)
        ]
        return narrowed if isinstance(result, (list, tuple)) else narrowed[0]

    reduce_ops.apply_impl = apply_impl
