"""CUPTI's kernel records over a version's timed calls: which kernels each call ran, and any kernel of the
version's process that ran outside its calls.

A version can run its own kernel when recorded and a library when timed, launch work from a thread of its own
between the timed calls (computing ahead while the judge's rest runs), or warm the L2 again once the judge
evicted it. So the timed calls run under torch's profiler (CUDA kernels from CUPTI), each call and each of
the judge's rests inside a block of its own, and from the records: the kernels run between one rest and the
next on the device (one timed call's: the judge compares them with the recorded call's), every kernel of the
version's that ran during a rest, and torch ops a thread of the version's ran between the calls.

Seen on an H100: a kernel launched straight from a block (a DSL's launch, the judge's spin) is linked to no
op, and a kernel's link to the op that launched it is now and then another op's. So kernels are placed only by
where they ran on the device, and the rests by their shape there: on the caller's stream, the spin followed
by the flush, whose kernels' names are those most rests' own flush op launched.
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

import torch
from torch.autograd import DeviceType
from torch.profiler import record_function

from harness.worker import profiled

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


def self_check(timer: Any) -> str | None:
    """Reads a plain torch call timed as a version's are, before any version is loaded: None when the watch sees
    one kernel a timed call and nothing outside them on this box's torch and CUPTI, else why it cannot be
    believed here (then it says so on every bench and flags nothing)."""
    values, flush = torch.ones(1 << 16, device="cuda"), torch.zeros(1 << 21, device="cuda")
    watch = KernelWatch()
    watch.start()
    try:
        timer.time_calls(lambda: values.add_(0.0), flush, budget_s=0.02, min_reps=10, max_reps=40, watch=watch)
    finally:
        seen = watch.stop()
    if "lost" in seen or "note" in seen:
        return str(seen.get("lost") or seen.get("note"))
    counts = list(seen["kernels"].values())
    if seen["outside_count"] or counts != [seen["timed_calls"]]:
        return f"a plain call read as {seen['kernels']} over {seen['timed_calls']} calls, {seen['outside'][:1]}"
    return None


class Records:
    """The profiler's raw events, sorted into blocks, torch ops and kernels."""

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
                self.blocks.append(Block(kind, int(index), op.start, op.end, op.thread))

    def _kernel(self, event: Any) -> Kernel:
        linked = self.ops.get(event.linked_correlation_id())
        name = _demangled(event.name())
        return Kernel(name, event.start_ns(), event.end_ns(), linked, _stream(event))

    def report(self, counts: dict[str, int]) -> dict[str, Any]:
        calls = [b for b in self.blocks if b.kind == "call"]
        rests = [b for b in self.blocks if b.kind == "rest"]
        if len(calls) != counts["call"] or len(rests) != counts["rest"]:
            return {"lost": "torch's profiler lost the timed calls' blocks (stopped or restarted during them)"}
        if not rests:
            return {"note": "no rest between the calls"}
        spans, judges = self._rests_on_device(rests)
        if len(spans) != len(rests):
            return {"note": f"the judge's rests were found {len(spans)} times on the device, for {len(rests)}"}
        timeline = _Timeline(spans)
        kernels: collections.Counter[str] = collections.Counter()
        outside: list[str] = []
        for kernel in self.kernels:
            if id(kernel) in judges:
                continue
            if timeline.overlaps(kernel):
                outside.append(f"{kernel.name[:120]} ran on the device during the judge's rest, outside its calls")
            elif timeline.after_a_rest(kernel):
                kernels[kernel.name] += 1
        main = rests[0].thread
        outside += [
            f"torch's {op} ran on a thread of its own between the timed calls" for op in self._between(calls, main)
        ]
        timed = Spans([c for c in calls if c.start > rests[0].start])
        return {
            "timed_calls": len(rests),
            "kernels": _capped(kernels),
            "ops": _capped(self._computing_ops(timed)),
            "outside": sorted(set(outside))[:MAX_NOTES],
            "outside_count": len(outside),
        }

    def _rests_on_device(self, rests: list[Block]) -> tuple[list[tuple[int, int]], set[int]]:
        """Each rest's span on the device, in order, and the ids of the kernels that make them up. The flush's
        kernels are named as those the flush op of most rests launched (its link to its op is not always right),
        on the stream they ran on; a rest is a spin there followed by them."""
        spans_of, main = Spans(rests), rests[0].thread
        flush: list[tuple[Kernel, int]] = []  # (kernel, the rest whose flush op it is linked to)
        for kernel in self.kernels:
            op = kernel.op
            rest = spans_of.at(op.start) if op and op.thread == main and op.name.startswith("aten::") else None
            if rest is not None:
                flush.append((kernel, rest.index))
        if not flush:
            return [], set()
        stream = collections.Counter(k.stream for k, _ in flush).most_common(1)[0][0]
        seen = collections.Counter(name for name, _ in {(k.name, index) for k, index in flush})
        names = {name for name, n in seen.items() if 2 * n >= len(rests)}  # what most rests' flush launched
        on_stream = sorted((k for k in self.kernels if k.stream == stream), key=lambda k: k.start)
        spans: list[tuple[int, int]] = []
        judges: set[int] = set()
        i = 0
        while i < len(on_stream):
            if SPIN in on_stream[i].name and i + 1 < len(on_stream) and on_stream[i + 1].name in names:
                j = i + 1
                while j + 1 < len(on_stream) and on_stream[j + 1].name in names:
                    j += 1
                spans.append((on_stream[i].start, on_stream[j].end))
                judges |= {id(k) for k in on_stream[i : j + 1]}
                i = j + 1
            else:
                i += 1
        return spans, judges

    def _between(self, calls: list[Block], main: int) -> list[str]:
        """torch ops that compute, run by a thread other than the judge's outside every call (host clock)."""
        spans = Spans(calls)
        return sorted(
            {
                op.name
                for op in self.ops.values()
                if op.thread != main
                and op.name.startswith("aten::")
                and profiled.computes(op.name)
                and spans.at(op.start) is None
            }
        )

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


class _Timeline:
    """The judge's rests on the device, in order: whether a kernel overlaps one, or runs after the first (in one
    timed call's window: from the end of a rest to the start of the next)."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self.spans = sorted(spans)
        self.starts = [s for s, _ in self.spans]

    def overlaps(self, kernel: Kernel) -> bool:
        i = bisect.bisect_left(self.starts, kernel.end) - 1  # the last rest starting before the kernel ends
        return i >= 0 and self.spans[i][1] > kernel.start

    def after_a_rest(self, kernel: Kernel) -> bool:
        return kernel.start >= self.spans[0][1]


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


def _demangled(name: str) -> str:
    """As torch's function events name a kernel (harness.worker.profiled's names for the recorded call)."""
    demangle = getattr(torch._C, "_demangle", None)
    with contextlib.suppress(Exception):
        return str(demangle(name)) if demangle else name
    return name
