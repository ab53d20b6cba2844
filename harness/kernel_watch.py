"""CUPTI's kernel records over a version's timed calls: which kernels each call ran, and any kernel of the
version's process that ran outside its calls.

A version can run its own kernel when recorded and a library when timed, launch work from a thread of its own
between the timed calls (computing ahead while the judge's rest runs), or warm the L2 again once the judge
evicted it. So the timed calls run under torch's profiler (CUDA kernels from CUPTI), each call and each of
the judge's rests inside a block of its own, and from the records: the kernels each timed call launched (the
judge compares them with the recorded call's), and every kernel that was launched outside a call, or ran on
the device outside its own call's window (from the end of the rest before it to the start of the rest after).
This runs in the kernel's process, so what it reports is evidence the judge checks, not proof.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from torch.autograd import DeviceType
from torch.profiler import record_function

from harness import profiled

MAX_NOTES = 3
MAX_NAMES = 64
SPIN = "spin_kernel"  # torch's _cuda_sleep: the judge's rest idles the device on it
RUNTIME = ("cuda_runtime", "cuda_driver")


@dataclass
class Block:
    """A call or rest block as the profiler recorded it (host clock, ns)."""

    kind: str  # "call" or "rest"
    index: int
    start: int
    end: int
    correlation: int
    thread: int


@dataclass
class Op:
    """A torch op or a record_function block (host clock, ns; the profiler's own thread numbering)."""

    name: str
    thread: int
    start: int
    end: int


@dataclass
class Kernel:
    name: str
    start: int  # on the device, in the host clock the profiler converts CUPTI's timestamps to
    end: int
    launched: int | None  # the host time of its launch: the start of the op it is linked to, where it is linked
    op: Op | None  # the torch op or block it was launched inside, where it is linked to one
    stream: int = 0


class KernelWatch:
    """Wraps the timed calls (`calling`) and the judge's rests (`resting`) in blocks under torch's profiler."""

    def __init__(self) -> None:
        token = secrets.token_hex(6)
        self.prefix = {"call": f"kerneltui.call.{token}.", "rest": f"kerneltui.rest.{token}."}
        self.prof = profiled.Profile(cuda=True)
        self.counts = {"call": 0, "rest": 0}

    def start(self) -> None:
        self.prof.start()

    def calling(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        def call() -> Any:
            with self._block("call"):
                return fn()

        return call

    def resting(self) -> contextlib.AbstractContextManager[Any]:
        return self._block("rest")

    @contextlib.contextmanager
    def _block(self, kind: str) -> Iterator[None]:
        index = self.counts[kind]
        self.counts[kind] += 1
        with record_function(f"{self.prefix[kind]}{index}"):
            yield

    def stop(self) -> dict[str, Any]:
        """{"timed_calls", "kernels": {name: count over the timed calls}, "outside": [...]} or {"note": why not}."""
        try:
            self.prof.stop()
            results = self.prof.prof.kineto_results
            events = list(results.events()) if results is not None else []
        except Exception as exc:  # the version stopped or broke the profiler
            return {"lost": f"torch's profiler failed over the timed calls ({type(exc).__name__})"}
        return Records(events, self.prefix).report(self.counts)


class Records:
    """The profiler's raw events, sorted into blocks, torch ops and kernels.

    A kernel launched by a torch op is linked to that op (its host start is on the blocks' own clock); one launched
    straight from a block (a DSL's launch, the judge's spin) is not linked to the block in every torch, nor are
    CUPTI's launch records there to place it: such kernels are placed by where they ran on the device, against
    the judge's rests, whose flush is a torch op (so always linked) and whose spin runs just before it."""

    def __init__(self, events: list[Any], prefix: dict[str, str]) -> None:
        self.blocks: list[Block] = []
        self.ops: dict[int, Op] = {}  # by correlation id: torch ops and record_function blocks
        annotations: set[str] = set()
        raw_kernels: list[Any] = []
        for event in events:
            kind = _activity(event)
            if event.device_type() == DeviceType.CUDA:
                if kind in (None, "kernel") and not event.name().startswith(("Memcpy", "Memset")):
                    raw_kernels.append(event)
            elif kind not in RUNTIME:
                self._add_op(event, prefix)
                if not event.name().startswith("aten::"):
                    annotations.add(event.name())
        self.blocks.sort(key=lambda b: b.start)
        # a record_function block comes back as a GPU-side annotation too, named as on the host: not a kernel
        self.kernels = [self._kernel(e) for e in raw_kernels if e.name() not in annotations]

    def _add_op(self, event: Any, prefix: dict[str, str]) -> None:
        name, correlation = event.name(), event.correlation_id()
        op = Op(name, event.start_thread_id(), event.start_ns(), event.end_ns())
        self.ops[correlation] = op
        for kind in ("call", "rest"):
            index = name.removeprefix(prefix[kind])
            if index != name and index.isdigit():
                self.blocks.append(Block(kind, int(index), op.start, op.end, correlation, op.thread))

    def _kernel(self, event: Any) -> Kernel:
        linked = self.ops.get(event.linked_correlation_id())
        stream = _stream(event)
        return Kernel(event.name(), event.start_ns(), event.end_ns(), linked.start if linked else None, linked, stream)

    def report(self, counts: dict[str, int]) -> dict[str, Any]:
        calls = [b for b in self.blocks if b.kind == "call"]
        rests = [b for b in self.blocks if b.kind == "rest"]
        if len(calls) != counts["call"] or len(rests) != counts["rest"]:
            return {"lost": "torch's profiler lost the timed calls' blocks (stopped or restarted during them)"}
        if not rests:
            return {"note": "no rest between the calls"}
        spans, theirs = self._rest_spans(Spans(rests), main=rests[0].thread)
        if len(spans) < len(rests) // 2 + 1:  # CUPTI's records do not link as expected here: say so
            return {"note": f"the judge's rests were found in {len(spans)} of {len(rests)} records"}
        windows = _windows(self.blocks, spans)
        during = _During(spans)
        host_calls = Spans(calls)
        kernels: collections.Counter[str] = collections.Counter()
        outside: list[str] = []
        for kernel in theirs:
            if kernel.launched is not None and host_calls.at(kernel.launched) is None:
                outside.append(f"{kernel.name[:120]} was launched between the timed calls")
            elif during.overlaps(kernel):
                outside.append(f"{kernel.name[:120]} ran on the device during the judge's rest, outside its calls")
            else:
                call = windows.holding(kernel.start)
                if call in windows.timed and not (kernel.op and kernel.op.name.startswith("aten::")):
                    kernels[kernel.name] += 1  # launched by no torch op: the recorded call's notion of its kernels
        return {
            "timed_calls": len(windows.timed),
            "kernels": _capped(kernels),
            "ops": _capped(self._computing_ops(Spans([c for c in calls if c.index in windows.timed]))),
            "outside": sorted(set(outside))[:MAX_NOTES],
            "outside_count": len(outside),
        }

    def _computing_ops(self, timed: Spans) -> collections.Counter[str]:
        """torch ops that compute, run during the timed calls (innermost: softmax's _softmax, as recorded)."""
        found = [
            op
            for op in self.ops.values()
            if op.name.startswith("aten::") and profiled.computes(op.name) and timed.at(op.start) is not None
        ]
        found.sort(key=lambda op: (op.thread, op.start, -op.end))
        counts: collections.Counter[str] = collections.Counter()
        for i, op in enumerate(found):
            inner = i + 1 < len(found) and found[i + 1].thread == op.thread and found[i + 1].start <= op.end
            if not inner:
                counts[op.name] += 1
        return counts

    def _rest_spans(self, rests: Spans, main: int) -> tuple[dict[int, tuple[int, int]], list[Kernel]]:
        """Each rest's span on the device (from its spin's start to its flush's end), by rest, and the kernels that
        are not the judge's. The flush is the torch op the rest block holds on the main thread (a thread of the
        version's launching at that moment is not the judge's); the spin, the kernel just before it on its stream."""
        flushes: dict[int, list[Kernel]] = collections.defaultdict(list)
        others: list[Kernel] = []
        for kernel in self.kernels:
            op = kernel.op
            rest = rests.at(op.start) if op is not None and op.thread == main else None
            (flushes[rest.index] if rest is not None else others).append(kernel)
        spins: set[int] = set()
        spans: dict[int, tuple[int, int]] = {}
        by_stream = _by_stream(others)
        for index, flush in flushes.items():
            first = min(flush, key=lambda k: k.start)
            spin = _just_before(by_stream.get(first.stream, []), first.start)
            if spin is not None and SPIN in spin.name:
                spins.add(id(spin))
            start = spin.start if spin is not None and SPIN in spin.name else first.start
            spans[index] = (start, max(k.end for k in flush))
        return spans, [k for k in others if id(k) not in spins]


class Windows(dict[int, tuple[float, float]]):
    """Per call block's index, its window on the device: from the end of the rest before it to the start of the
    rest after it. `timed`: the calls that follow a rest (the timed ones, not the warm-up's)."""

    timed: set[int]
    order: list[tuple[float, float, int]]
    lows: list[float]

    def holding(self, time: int) -> int | None:
        """The call whose window holds this time on the device."""
        if len(self.order) != len(self):
            self.order = sorted((low, high, index) for index, (low, high) in self.items())
            self.lows = [low for low, _, _ in self.order]
        i = bisect.bisect_right(self.lows, time) - 1  # calls sharing one window (the warm-up's): any of them
        return self.order[i][2] if i >= 0 and time < self.order[i][1] else None


def _windows(blocks: list[Block], spans: dict[int, tuple[int, int]]) -> Windows:
    windows = Windows()
    windows.timed, windows.order, windows.lows = set(), [], []
    before: Block | None = None
    pending: list[Block] = []
    for block in [*blocks, None]:
        if block is not None and block.kind == "call":
            pending.append(block)
            continue
        low = spans.get(before.index, (0, -1e30))[1] if before else -1e30
        high = spans.get(block.index, (1e30, 0))[0] if block else 1e30
        for call in pending:
            windows[call.index] = (low, high)
            if before is not None:
                windows.timed.add(call.index)
        pending, before = [], block
    return windows


class _During:
    """The judge's rests on the device: whether a kernel overlaps one."""

    def __init__(self, spans: dict[int, tuple[int, int]]) -> None:
        self.spans = sorted(spans.values())
        self.starts = [s for s, _ in self.spans]

    def overlaps(self, kernel: Kernel) -> bool:
        i = bisect.bisect_right(self.starts, kernel.end) - 1  # the last rest starting before the kernel ends
        return i >= 0 and self.spans[i][1] > kernel.start


def _by_stream(kernels: list[Kernel]) -> dict[int, list[Kernel]]:
    found: dict[int, list[Kernel]] = collections.defaultdict(list)
    for kernel in kernels:
        found[kernel.stream].append(kernel)
    for listed in found.values():
        listed.sort(key=lambda k: k.start)
    return found


def _just_before(kernels: list[Kernel], time: int) -> Kernel | None:
    """The kernel (of kernels sorted by start) that started last before `time`."""
    i = bisect.bisect_left([k.start for k in kernels], time) - 1
    return kernels[i] if i >= 0 else None


class Spans:
    """Blocks sorted by start, none overlapping (all opened on one thread): which one holds a host time (from
    its start, before its end: the next block may start at the very nanosecond one ends)."""

    def __init__(self, blocks: list[Block]) -> None:
        self.blocks = blocks
        self.starts = [b.start for b in blocks]

    def at(self, time: int) -> Block | None:
        i = bisect.bisect_right(self.starts, time) - 1
        return self.blocks[i] if i >= 0 and time < self.blocks[i].end else None


def _capped(counter: collections.Counter[str]) -> dict[str, int]:
    return {name[:200]: int(n) for name, n in counter.most_common(MAX_NAMES)}


def _activity(event: Any) -> str | None:
    kind = getattr(event, "activity_type", None)
    if kind is None:
        return None
    with contextlib.suppress(Exception):
        return str(kind()).lower()
    return None


def _stream(event: Any) -> int:
    with contextlib.suppress(Exception):
        return int(event.device_resource_id())
    return 0
