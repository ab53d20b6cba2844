"""Reading a frame from a process the judge does not trust: each field checked once for its type and bounds.

A worker runs agent-written code, which can write any bytes to the judge's socket (tests/exploits/writes_fds.py),
so a reply is read as hostile data: a wrong type, a string or list past its bound, a float that is NaN or infinite
where a figure must be finite, a bool where a count must be an int, nesting deeper than any honest reply's, a field
missing or one that no message has all raise one MalformedReply naming the message and the field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

# Plain JSON (None, bools, numbers, text, lists and objects of them), as checked_data or checked_tree checked it.
# Any rather than a recursive union: the records' readers take them as untrusted data whatever their type says.
Json = Any
T = TypeVar("T")

MAX_NAME = 1024  # a kernel's, an op's, a cache group's name; a device, a stage
MAX_TEXT = 1 << 20  # an error, a trace, a note: a compiler's diagnostics can run long
MAX_ITEMS = 100_000  # a list of samples or names
MAX_DEPTH = 32  # nesting of a record or of an encoded tree of inputs (an honest one is under 10)
MAX_NODES = 1 << 20  # values in one nested record: a header is at most 16 MiB anyway
MAX_FIGURE = 1e12  # seconds or milliseconds: past it a figure is no timing (and a float no longer holds an int)
TREE_MARKERS = frozenset({"$t", "$tuple", "$dict", "$float", "$dtype"})  # harness.wire.frames.encode_tree's
NON_FINITE = frozenset({"nan", "inf", "-inf"})  # what encode_tree writes for a float JSON cannot hold


class MalformedReply(ValueError):
    """A frame that is not the message it should be: which message (`op`), which field, and why."""

    def __init__(self, op: str, field: str, why: str) -> None:
        super().__init__(f"{op} reply: {field}: {why}")
        self.op, self.field, self.why = op, field, why


class Fields:
    """A frame's fields, read one by one and checked; `known`: the only keys it may have."""

    def __init__(self, op: str, raw: object, known: frozenset[str]) -> None:
        if not isinstance(raw, dict):
            raise MalformedReply(op, "(frame)", f"a {type(raw).__name__}, not an object")
        unknown = [k for k in raw if k not in known]
        if unknown:
            raise MalformedReply(op, shown(unknown[0]), "no such field")
        self.op, self.raw = op, raw

    def fail(self, key: str, why: str) -> MalformedReply:
        return MalformedReply(self.op, key, why)

    def at(self, key: str) -> Callable[[str], MalformedReply]:
        """How a check of field `key` fails."""
        return lambda why: self.fail(key, why)

    def _get(self, key: str, required: bool) -> Any:
        if key not in self.raw and required:
            raise self.fail(key, "missing")
        return self.raw.get(key)

    def flag(self, key: str, required: bool = True) -> bool:
        value = self._get(key, required)
        if value is None and not required:
            return False
        if not isinstance(value, bool):
            raise self.fail(key, f"a {type(value).__name__}, not true or false")
        return value

    def text(self, key: str, limit: int = MAX_TEXT) -> str:
        value = self._get(key, True)
        return checked_text(value, limit, self.at(key))

    def optional_text(self, key: str, limit: int = MAX_TEXT) -> str | None:
        value = self._get(key, False)
        return None if value is None else checked_text(value, limit, self.at(key))

    def count(self, key: str, limit: int = 1 << 62, required: bool = True) -> int:
        value = self._get(key, required)
        if value is None and not required:
            return 0
        return checked_count(value, limit, self.at(key))

    def number(self, key: str, required: bool = True) -> float:
        """A finite figure of 0 or more (seconds, a count of them)."""
        value = self._get(key, required)
        if value is None and not required:
            return 0.0
        return checked_figure(value, self.at(key))

    def figures(self, key: str, required: bool = True) -> tuple[float, ...] | None:
        """A list of finite figures (timings, ms): None where it may be absent and is."""
        value = self._get(key, required)
        if value is None and not required:
            return None
        items = checked_list(value, MAX_ITEMS, self.at(key))
        return tuple(checked_figure(v, self.at(f"{key}[{i}]")) for i, v in enumerate(items))

    def indices(self, key: str, limit: int) -> tuple[int, ...]:
        """An optional list of whole numbers from 0 to `limit`: () where it is absent."""
        value = self._get(key, False)
        if value is None:
            return ()
        items = checked_list(value, MAX_ITEMS, self.at(key))
        return tuple(checked_count(v, limit, self.at(f"{key}[{i}]")) for i, v in enumerate(items))

    def texts(self, key: str, limit: int = MAX_NAME, items: int = MAX_ITEMS) -> tuple[str, ...]:
        values = checked_list(self._get(key, True), items, self.at(key))
        return tuple(checked_text(v, limit, self.at(f"{key}[{i}]")) for i, v in enumerate(values))

    def names(self, key: str, required: bool = True) -> dict[str, str]:
        """{name: short text} (a version's kernels by name, with their source hashes)."""
        value = self._get(key, required)
        if value is None and not required:
            return {}
        return checked_mapping(value, lambda v, fail: checked_text(v, MAX_NAME, fail), self.at(key))

    def timings(self, key: str) -> dict[str, float]:
        """{phase: seconds}, optional: a request's phases, for the judge's trace."""
        value = self._get(key, False)
        if value is None:
            return {}
        return checked_mapping(value, checked_figure, self.at(key), items=64)

    def data(self, key: str) -> Json:
        """Plain JSON, bounded in depth and size, read for its meaning elsewhere (harness.judge.trust,
        harness.judge.timed_kernels, harness.worker.regions' regions_from): None where absent."""
        value = self._get(key, False)
        checked_data(value, Budget(self.at(key)))
        return value

    def tree(self, key: str, tensors: int, required: bool = True) -> Json:
        """An encoded tree of values and tensors (harness.wire.frames.encode_tree) whose tensor references fall
        among the frame's `tensors`: harness.wire.frames.decode_tree can then only fail on a dtype this torch lacks."""
        value = self._get(key, required)
        if value is None and not required:
            return None
        checked_tree(value, tensors, Budget(self.at(key)))
        return value

    def devices(self) -> tuple[str | None, ...]:
        """The device each of the frame's tensors was on when sent (harness.wire.frames adds `tensors`)."""
        specs = checked_list(self._get("tensors", False) or [], MAX_ITEMS, self.at("tensors"))
        found: list[str | None] = []
        for i, spec in enumerate(specs):
            if not isinstance(spec, dict):
                raise self.fail(f"tensors[{i}]", f"a {type(spec).__name__}, not an object")
            device = spec.get("device")
            found.append(None if device is None else checked_text(device, 64, self.at("tensors")))
        return tuple(found)

    def tensor_count(self) -> int:
        """How many tensors came with the frame: what its trees may refer to."""
        return len(self.devices())

    def tensor_refs(self, key: str, tensors: int) -> tuple[int, ...]:
        """A tuple of tensors as encode_tree writes one ({"$tuple": [{"$t": i}, ...]}): their indices."""
        value = self._get(key, True)
        inner = value.get("$tuple") if isinstance(value, dict) and len(value) == 1 else None
        if not isinstance(inner, list):
            raise self.fail(key, "not a tuple of tensors")
        refs = []
        for i, item in enumerate(checked_list(inner, MAX_ITEMS, self.at(key))):
            index = item.get("$t") if isinstance(item, dict) and len(item) == 1 else None
            refs.append(checked_count(index, tensors - 1, self.at(f"{key}[{i}]")))
        return tuple(refs)


class Budget:
    """How many more values a nested field may hold before it is refused."""

    def __init__(self, fail: Callable[[str], MalformedReply], nodes: int = MAX_NODES) -> None:
        self.fail, self.left = fail, nodes

    def take(self, depth: int) -> None:
        self.left -= 1
        if self.left < 0:
            raise self.fail(f"more than {MAX_NODES} values")
        if depth > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH}")


def shown(value: object) -> str:
    """A value as an error names it: short, and never a repr that could be huge, deep or refused (an integer of
    5000 digits)."""
    if value is None or isinstance(value, (bool, float)):
        return repr(value)
    if isinstance(value, int):
        return repr(value) if abs(value) < 10**30 else "a very large number"
    if isinstance(value, str):
        return repr(value[:40]) + ("..." if len(value) > 40 else "")
    return f"a {type(value).__name__}"


def checked_text(value: Any, limit: int, fail: Callable[[str], MalformedReply]) -> str:
    if not isinstance(value, str):
        raise fail(f"a {type(value).__name__}, not text")
    if len(value) > limit:
        raise fail(f"{len(value)} characters, more than {limit}")
    return value


def checked_count(value: Any, limit: int, fail: Callable[[str], MalformedReply]) -> int:
    if type(value) is not int:  # a bool is an int to isinstance
        raise fail(f"a {type(value).__name__}, not a whole number")
    if not 0 <= value <= limit:
        raise fail(f"{shown(value)} is not between 0 and {limit}")
    return value


def checked_figure(value: Any, fail: Callable[[str], MalformedReply]) -> float:
    if type(value) not in (int, float):
        raise fail(f"a {type(value).__name__}, not a number")
    if not 0 <= value <= MAX_FIGURE:  # NaN fails both; an integer of 5000 digits compares as it is, exactly
        raise fail(f"{shown(value)} is not a number from 0 to {MAX_FIGURE:g}")
    return float(value)


def checked_list(value: Any, limit: int, fail: Callable[[str], MalformedReply]) -> list[Any]:
    if not isinstance(value, list):
        raise fail(f"a {type(value).__name__}, not a list")
    if len(value) > limit:
        raise fail(f"{len(value)} items, more than {limit}")
    return value


def checked_mapping(
    value: Any,
    check: Callable[[Any, Callable[[str], MalformedReply]], T],
    fail: Callable[[str], MalformedReply],
    items: int = MAX_ITEMS,
) -> dict[str, T]:
    if not isinstance(value, dict):
        raise fail(f"a {type(value).__name__}, not an object")
    if len(value) > items:
        raise fail(f"{len(value)} entries, more than {items}")
    out: dict[str, T] = {}
    for key, item in value.items():
        checked_text(key, MAX_NAME, fail)
        out[key] = check(item, _within(fail, f"[{shown(key)}]"))
    return out


def _within(fail: Callable[[str], MalformedReply], where: str) -> Callable[[str], MalformedReply]:
    return lambda why: fail(f"{where}: {why}")


def checked_data(value: Any, budget: Budget, depth: int = 0) -> None:
    """Plain JSON within the budget's count of values and MAX_DEPTH."""
    budget.take(depth)
    if isinstance(value, str):
        checked_text(value, MAX_TEXT, budget.fail)
    elif isinstance(value, list):
        for item in value:
            checked_data(item, budget, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            checked_text(key, MAX_TEXT, budget.fail)
            checked_data(item, budget, depth + 1)
    elif value is not None and not isinstance(value, (bool, int, float)):
        raise budget.fail(f"a {type(value).__name__}, not plain data")


def checked_tree(value: Any, tensors: int, budget: Budget, depth: int = 0) -> None:
    """An encoded tree as harness.wire.frames.encode_tree writes it, and nothing decode_tree would trip on."""
    budget.take(depth)
    if isinstance(value, list):
        for item in value:
            checked_tree(item, tensors, budget, depth + 1)
    elif isinstance(value, dict):
        _checked_marker(value, tensors, budget, depth)
    elif isinstance(value, str):
        checked_text(value, MAX_TEXT, budget.fail)
    elif value is not None and not isinstance(value, (bool, int, float)):
        raise budget.fail(f"a {type(value).__name__} in an encoded tree")


def _checked_marker(value: dict[str, Any], tensors: int, budget: Budget, depth: int) -> None:
    if len(value) != 1 or not TREE_MARKERS.issuperset(value):
        raise budget.fail(f"an object with keys {', '.join(shown(k) for k in list(value)[:3])} in an encoded tree")
    (marker, inner), fail = next(iter(value.items())), budget.fail
    if marker == "$t":
        checked_count(inner, tensors - 1, lambda why: fail(f"a tensor reference: {why}"))
    elif marker == "$tuple":
        checked_tree(checked_list(inner, MAX_ITEMS, fail), tensors, budget, depth + 1)
    elif marker == "$dict":
        for pair in checked_list(inner, MAX_ITEMS, fail):
            if not isinstance(pair, list) or len(pair) != 2:
                raise fail("a $dict entry that is not [key, value]")
            checked_text(pair[0], MAX_TEXT, fail)
            checked_tree(pair[1], tensors, budget, depth + 1)
    elif marker == "$float":
        if not isinstance(inner, str) or inner not in NON_FINITE:  # a list is no set member: TypeError
            raise fail(f"$float {shown(inner)}, not one of {sorted(NON_FINITE)}")
    elif not isinstance(inner, str) or not inner.isidentifier() or len(inner) > 64:
        raise fail(f"$dtype {shown(inner)}, not a dtype's name")
