"""torch's own profiler over a recorded call: a second view of what ran, below the version's Python reach.

The recorder's TorchDispatchMode sits on a stack that a version can set aside for a moment. The profiler's
op records come from torch's dispatcher underneath it, and on a GPU its kernel records from CUPTI: every
kernel launched in the process, whoever launched it (a torch op, a DSL, a library called through ctypes).
From them: the compute ops torch ran (innermost only, as the dispatch mode sees them: `_softmax`, not
`softmax` and its `_softmax`) and the CUDA kernels that no torch op launched, which must be the version's own.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import secrets
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.autograd import profiler as autograd_profiler
from torch.profiler import record_function

# Ops that allocate, fill with a constant, reshape or move data: they compute nothing a kernel should.
CREATION = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "ones",
    "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "fill_", "zero_", "scalar_tensor",
    "arange", "lift_fresh", "resize_", "set_", "_local_scalar_dense", "record_stream", "detach", "detach_", "alias",
    "_unsafe_view", "view", "reshape", "_reshape_alias", "as_strided", "t", "expand", "permute", "transpose",
    "squeeze", "unsqueeze", "select", "slice", "split", "split_with_sizes", "chunk", "unbind", "narrow",
    "unflatten", "flatten", "view_as", "is_nonzero", "_to_dense", "contiguous", "is_same_size", "size", "stride",
    "item", "resolve_conj", "resolve_neg", "expand_as", "broadcast_to", "movedim", "swapaxes", "numel", "dim",
    "result_type", "lift", "data_ptr", "_record_function_enter", "_record_function_enter_new",
    "_record_function_exit",
}  # fmt: skip
MOVEMENT = {"copy_", "_to_copy", "clone", "_copy_from", "_copy_from_and_resize", "lift_fresh_copy", "to"}
# torch's C-level device synchronize, bound before any version is imported (one may patch torch.cuda's)
_SYNCHRONIZE = getattr(torch._C, "_cuda_synchronize", lambda: None)
# whether this thread's torch ops reach RecordFunction's callbacks, the profiler's among them
_RECORD_FUNCTIONS = getattr(torch._C._autograd, "_enable_record_function", lambda enabled: None)
MAX_NAMES = 64
COPIES = ("Memcpy", "Memset")
FUNCTION_SCOPE = 0  # torch's RecordScope.FUNCTION: an op; record_function blocks are USER_SCOPE


def computes(op: str) -> bool:
    """'aten::add' computes; 'aten::empty_like', 'aten::copy_', 'aten::view' do not."""
    name = op.removeprefix("aten::")
    return name not in CREATION and name not in MOVEMENT


class Profile:
    """torch's profiler (Kineto: CPU ops, and CUDA kernels from CUPTI with `cuda`), as torch.profiler.profile
    runs it, less its start's `hasattr(torch, "_inductor")`: that imports torch._inductor and torch._dynamo
    (over a second of CPU in every worker) to read a CUDA-graphs setting no call here uses."""

    def __init__(self, cuda: bool) -> None:
        self.prof = autograd_profiler.profile(use_cpu=True, use_device="cuda" if cuda else None, use_kineto=True)

    def start(self) -> None:
        self.prof.__enter__()

    def stop(self) -> None:
        self.prof.__exit__(None, None, None)

    def events(self) -> list[Any]:
        return list(self.prof.function_events or [])


def warm(cuda: bool) -> None:
    """The first start of torch's profiler in a process (CUPTI's set-up on a GPU) is paid before the version."""
    prof = Profile(cuda)
    prof.start()
    try:
        torch.zeros(1, device="cuda" if cuda else "cpu").add_(1)
    finally:
        prof.stop()


class Profiled:
    """torch's profiler over recorded calls: one session for one call, or for a rung's calls together (stopping a
    session and reading its events has a cost of its own: on an H100 a recorded call under a session of its own
    took 17 ms in a worker, a few times the call). Each call runs inside a block
    named for it, and what the profiler saw is sorted into calls by those blocks' spans on the host clock (the
    worker synchronizes before a call's block closes, so its kernels ran inside it). `launch_label` marks the DSL
    launches (their own data movement, the interpreter's copies, is not the version's)."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.launch_label = f"kerneltui.launch.{secrets.token_hex(8)}"
        self.version_label = f"kerneltui.version.{secrets.token_hex(8)}"  # the version's code inside a launch
        self.marks: list[str] = []  # one block a call, in order
        self.prof = Profile(cuda)
        self.started = False
        self.quiet_between = False

    def start(self) -> None:
        self.prof.start()
        self.started = True

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """One call's block: if it is gone at the end, the profiler was stopped or restarted during the call.
        With `quiet_between`, this thread records no torch op between blocks until the session stops: the
        worker's own between calls (its inputs' copies, the outputs sent) would be most of a shared session's
        events, and reading events is most of its cost."""
        mark = f"kerneltui.call.{secrets.token_hex(8)}"
        self.marks.append(mark)
        _RECORD_FUNCTIONS(True)
        try:
            with record_function(mark):
                yield
        finally:
            if self.quiet_between:
                _RECORD_FUNCTIONS(False)

    def launching(self) -> Any:
        return record_function(self.launch_label)

    def as_version(self) -> Any:
        return record_function(self.version_label)

    def stop(self) -> list[dict[str, Any]]:
        """Each call's {"ops": {op: count}, "kernels": {name: count}, "all_kernels": ...} or {"lost": why}."""
        _RECORD_FUNCTIONS(True)
        try:
            self.prof.stop()
            events = self.prof.events()
        except Exception as exc:  # the version stopped it, or broke it
            lost = {"lost": f"torch's profiler failed at the end of the call ({type(exc).__name__})"}
            return [dict(lost) for _ in self.marks]
        cpu = [e for e in events if e.device_type == DeviceType.CPU]
        blocks = {e.name: e.time_range for e in cpu if e.name in set(self.marks)}
        ops, kernels = _ByStart(cpu), _ByStart(_kernel_events(events, cpu))
        return [self._call_report(blocks.get(mark), ops, kernels) for mark in self.marks]

    def _call_report(self, block: Any, cpu: _ByStart, kernels: _ByStart) -> dict[str, Any]:
        if block is None:
            return {"lost": "torch's profiler was stopped or restarted during the call"}
        ops = cpu.within(block)
        every = collections.Counter(k.name for k in kernels.within(block))
        own = every.copy()  # launched by no torch op: the DSLs' (and anything the version launched by hand)
        for event in ops:
            if event.name.startswith("aten::"):
                own.subtract(k.name for k in getattr(event, "kernels", ()))
        return {
            "ops": _capped(collections.Counter(e.name for e in ops if self._innermost_compute(e))),
            "kernels": _capped(collections.Counter({name: n for name, n in own.items() if n > 0})),
            "all_kernels": _capped(every),  # torch ops' too: what its timed calls are held to
        }

    def _innermost_compute(self, event: Any) -> bool:
        """A torch op (not a record_function a version named like one) that computes, inside no DSL launch,
        and calls no other op that computes (`softmax` is composite: its `_softmax` is the one counted)."""
        if not _computing_op(event):
            return False
        if any(_computing_op(child) or not _innermost_free(child) for child in event.cpu_children):
            return False
        parent = event.cpu_parent
        while parent is not None:
            if parent.name == self.version_label:  # the version's grid or hook, run by the launch
                return True
            if parent.name == self.launch_label:
                return False
            parent = parent.cpu_parent
        return True


class SharedProfile:
    """One profiler session over the calls that share it (a rung's), and what it saw of each until the judge
    collects it; stopped before any other request (one profiler at a time: the timed calls' watch is one too)."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.session: Profiled | None = None
        self.records: list[dict[str, Any]] = []

    def for_call(self) -> Profiled:
        if self.session is None:
            self.session = Profiled(self.cuda)
            self.session.quiet_between = True
        return self.session

    def stop(self) -> None:
        if self.session is not None:
            session, self.session = self.session, None
            self.records += session.stop() if session.started else []

    def collect(self) -> list[dict[str, Any]]:
        self.stop()
        records, self.records = self.records, []
        return records


def session_for(profile: bool | Profiled) -> tuple[Profiled | None, dict[str, Any] | None]:
    """The session a recorded call runs under, started (True: one of its own; a Profiled: one it shares), and
    None; or None and its record where the profiler would not start."""
    if not profile:
        return None, None
    session = profile if isinstance(profile, Profiled) else Profiled(torch.cuda.is_available())
    if not session.started:
        try:
            session.start()
        except Exception as exc:  # the version may have broken it: a tamper, not the version's error
            return None, {"lost": f"torch's profiler would not start ({exc})"[:200]}
    return session, None


@contextlib.contextmanager
def call_block(session: Profiled | None) -> Iterator[None]:
    """One call's block in `session`, the device idle at both ends: nothing launched before it runs inside it,
    and its kernels are done inside it, whatever the version did to torch's synchronize."""
    if session is None:
        yield
        return
    if session.cuda:
        _SYNCHRONIZE()
    with session.call():
        yield
        if session.cuda:
            _SYNCHRONIZE()


def call_report(session: Profiled, shared: bool) -> dict[str, Any]:
    """The call's record: {"pending": its index} in a shared session (collected later), else its own."""
    return {"pending": len(session.marks) - 1} if shared else session.stop()[0]


class _ByStart:
    """Events in order of their start on the host clock: those that start inside a span, found by bisection (a
    shared session's calls each look among all of its events)."""

    def __init__(self, events: Iterable[Any]) -> None:
        self.events = sorted(events, key=lambda e: e.time_range.start)
        self.starts = [e.time_range.start for e in self.events]

    def within(self, span: Any) -> list[Any]:
        return self.events[bisect.bisect_left(self.starts, span.start) : bisect.bisect_right(self.starts, span.end)]


def _kernel_events(events: Iterable[Any], cpu: list[Any]) -> list[Any]:
    """Every CUDA kernel's event; record_function blocks come back as GPU-side annotations too, named as on the
    CPU, and copies and sets are no kernels."""
    annotations = {e.name for e in cpu if e.scope != FUNCTION_SCOPE}
    return [
        e
        for e in events
        if e.device_type == DeviceType.CUDA and e.name not in annotations and not e.name.startswith(COPIES)
    ]


def _computing_op(event: Any) -> bool:
    return event.scope == FUNCTION_SCOPE and event.name.startswith("aten::") and computes(event.name)


def _innermost_free(event: Any) -> bool:
    """No op that computes anywhere below this event."""
    return all(not _computing_op(child) and _innermost_free(child) for child in event.cpu_children)


def _capped(counter: collections.Counter[str]) -> dict[str, int]:
    return {str(name)[:200]: int(n) for name, n in counter.most_common(MAX_NAMES)}


def device_times(
    fn: Callable[[], Any], evict: Callable[[], None], synchronize: Callable[[], None], reps: int
) -> list[float]:
    """Each call's device time (ms) from CUPTI's kernel records: the sum of its kernels' durations, on any
    stream, the quantity Nsight Compute's gpu__time_duration sums (no launch gaps, no events).

    Each call runs alone between device-wide synchronizes, after `evict` (an L2 eviction and the rest the timed
    calls get), inside a block named for it;
    a kernel belongs to the call whose block was open when it started (the profiler puts CUPTI's GPU
    timestamps on the host's clock). Memory copies and sets are not kernels and are left out, as ncu does."""
    marks = [f"kerneltui.timed.{secrets.token_hex(6)}.{i}" for i in range(reps)]
    prof = Profile(cuda=True)
    prof.start()
    try:
        for mark in marks:
            evict()
            synchronize()
            with record_function(mark):
                fn()
                synchronize()
    finally:
        prof.stop()
    events = prof.events()
    blocks = {e.name: e.time_range for e in events if e.name in marks and e.device_type == DeviceType.CPU}
    if len(blocks) != reps:
        raise RuntimeError("torch's profiler lost the timed calls' blocks (stopped or restarted during them)")
    kernels = _ByStart(_kernel_events(events, [e for e in events if e.device_type == DeviceType.CPU]))
    return [sum(k.time_range.elapsed_us() for k in kernels.within(blocks[m])) / 1000.0 for m in marks]
