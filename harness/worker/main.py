"""The kernel's process: imports one untrusted version and runs it on inputs the judge sends.

Started ahead of need by harness.containment.sandbox (which confined the process before torch and triton were
imported), it waits for `load`, imports the version from its read-only inbox, then answers `call` and
`bench` requests with output tensors only, recording what each recorded call launched (harness.worker.recorder).
It never sees the reference, the problem or the seeds and never decides a verdict: whatever the version
does to this process (patching torch, printing, exiting) can at worst spoil its own outputs and records.

Modes: `run` executes kernels (on the GPU, or through the Triton interpreter with no GPU);
`compile` only compiles them for an absent GPU (harness.gpu.aot).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib.util
import os
import re
import socket
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

# Decided here rather than by the judge: only this process's torch knows whether it can use the GPU.
if os.environ.pop("KERNELTUI_INTERPRET_IF_NO_GPU", None) and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

from harness.containment.sandbox import FILE_LIMIT_HINT
from harness.contract import messages
from harness.gpu import timing
from harness.wire import frames as wire
from harness.wire import shared_block
from harness.worker import kernel_watch, profiled
from harness.worker.model_call import ModelCall
from harness.worker.recorder import Recorder, kernel_sources

# Taken before any version is imported: patching harness.gpu.timing later cannot change how calls are timed.
TIMING = timing.frozen()
_NVTX = getattr(torch._C, "_nvtx", None)  # CUDA builds only; bound before a version could replace them
NVTX_PUSH, NVTX_POP = (getattr(_NVTX, "rangePushA", None), getattr(_NVTX, "rangePop", None))

try:
    import triton  # imported ahead of need: a version should not wait for it
except ImportError:
    triton = None

if triton is not None and os.environ.get("TRITON_INTERPRET") == "1":
    from harness.worker import interpreter_fixes

    interpreter_fixes.install()

ENTRY = "custom_kernel"
MODEL_ENTRY = "ModelNew"  # a KernelBench version's nn.Module, used where there is no custom_kernel
DEVICE_REPS, DEVICE_BUDGET_MS = 30, 300.0  # calls timed through CUPTI: up to 30, about 0.3 s of kernels
MAX_TRACE_CHARS = 4000
RECORDER = Recorder()


class Phases:
    """Seconds spent in each phase of one request, sent back with the reply (`phases_s`): where a verdict's
    time goes, read by the judge's trace (KERNELTUI_TRACE) and benchmarks/verdict_latency.py."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Any:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - start, 4)


# A reply carrying a call's outputs, built from their indices among the frame's tensors, the inputs' tree as the call
# left them (or None), and the outputs themselves
OutputsReply = Callable[[tuple[int, ...], Any, tuple[torch.Tensor, ...]], "messages.CallReply | messages.BenchReply"]


class VersionError(Exception):
    """A version that cannot be used as it is; the message says why, with no exception name."""


class Worker:
    def __init__(self, sock: socket.socket, mode: str, arch: str) -> None:
        self.sock = sock
        self.mode = mode
        self.arch = arch
        self.module: Any = None
        self.entry: Any = None
        self.path: Path | None = None
        self.cuda = mode == "run" and torch.cuda.is_available()
        self.device = torch.device("cuda") if self.cuda else torch.device("cpu")
        self.flush: torch.Tensor | None = None
        self.bench_inputs: tuple[Any, ...] = ()
        self.placements: list[tuple[Any, ...]] = [()]  # the bench inputs and copies elsewhere (timing.placed_copies)
        self.profiler: str | None = None  # why recorded calls run without torch's profiler, if they do
        self.block: shared_block.Block | None = None  # memory the judge shares: large tensors both ways
        self.shared_reply = False  # whether the judge, on this request, takes the reply's through the block
        self.watch_note: str | None = None  # why the timed calls are not watched here (harness.worker.kernel_watch)
        self.shared = profiled.SharedProfile(self.cuda)  # the profiler session a rung's recorded calls share

    def serve(self) -> None:
        if self.mode == "run":
            self.profiler = warm_profiler(self.cuda)
        said = (self.profiler or "on") if self.mode == "run" else None
        wire.send(self.sock, ready_message(self.mode, self.cuda, said).frame())
        if self.mode == "run" and self.cuda:  # while it waits for a version (a spare's wait): before any is read
            self.watch_note = f"torch's profiler is {self.profiler}" if self.profiler else watch_check()
        while True:
            try:
                header, tensors = wire.recv(self.sock, block=self.block)
            except wire.ChannelClosed:
                return
            op = header.get("op")
            self.shared_reply = header.get("shared_reply") is True and self.block is not None
            if op == "exit":
                return
            if op not in ("call", "profiled"):
                self.shared.stop()
            handler = getattr(self, f"do_{op}", None)
            if handler is None:
                wire.send(self.sock, messages.Failure(f"unknown request {op!r}").frame())
                continue
            handler(header, tensors)

    def reply_error(self, exc: BaseException, stage: str) -> None:
        wire.send(self.sock, describe_exception(exc, self.path, stage).frame())

    def do_load(self, header: dict[str, Any], _: list[torch.Tensor]) -> None:
        from harness.containment.sandbox import limit_file_size

        request = messages.LoadRequest.from_header(header)
        if request.max_file_bytes:
            limit_file_size(int(request.max_file_bytes))  # only ever lowers the limit set at start
        self.path = Path(request.path)
        try:
            cutedsl = install_hooks(self.mode, self.arch, request.dsls, self.cuda)
            self.module = import_version(self.path)
            if self.mode == "compile" and "cutlass" in sys.modules and not cutedsl:  # imported some other way
                from harness.gpu import aot

                aot.install_cutedsl()
            self.entry = entry_of(self.module, self.path, self.device)
        except BaseException as exc:  # SystemExit too: a version may call sys.exit at import
            self.reply_error(exc, "load")
            return
        entry = MODEL_ENTRY if isinstance(self.entry, ModelCall) else ENTRY
        wire.send(self.sock, messages.LoadReply(self.cuda, kernel_sources(self.module), entry).frame())

    def do_call(self, header: dict[str, Any], tensors: list[torch.Tensor]) -> None:
        phases = Phases()
        with phases("inputs"):
            request = messages.CallRequest.from_header(header)
            inputs = self.materialize(request.inputs, tensors)
            poison(inputs, self.device, request.poison)
        start = time.perf_counter()
        try:
            with phases("recorded call"), RECORDER.recording(inputs, self.profile_for(request), self.held()):
                out = self.entry(*inputs)
                if self.cuda:
                    torch.cuda.synchronize()
        except BaseException as exc:
            self.reply_error(exc, "call")
            return
        seconds = time.perf_counter() - start

        def reply(refs: tuple[int, ...], after: Any, outputs: tuple[torch.Tensor, ...]) -> messages.CallReply:
            return messages.CallReply(refs, after, seconds, RECORDER.report(outputs), phases.seconds)

        self.send_outputs(out, inputs, reply)

    def profile_for(self, request: messages.CallRequest) -> bool | profiled.Profiled:
        """How a recorded call is profiled: not at all where the profiler is off here; in the session it shares
        with the other shared calls; else in a session of its own."""
        if self.profiler is not None:
            return False
        if not request.shared_profile:
            self.shared.stop()
        return self.shared.for_call() if request.shared_profile else True

    def do_profiled(self, header: dict[str, Any], _: list[torch.Tensor]) -> None:
        wire.send(self.sock, messages.ProfiledReply(self.shared.collect()).frame())

    def held(self) -> tuple[Any, ...]:
        """What holds the version's own tensors from before a call: its module and its entry point."""
        return (self.module, self.entry)

    def do_compile(self, header: dict[str, Any], tensors: list[torch.Tensor]) -> None:
        """Compile-only call (mode `compile`): launches become compiles; outputs are meaningless."""
        inputs = self.materialize(messages.CompileRequest.from_header(header).inputs, tensors)
        start = time.perf_counter()
        try:
            with RECORDER.recording(inputs):
                self.entry(*inputs)
        except BaseException as exc:
            self.reply_error(exc, "compile")
            return
        recorded = RECORDER.report(())
        wire.send(self.sock, messages.CompileReply(time.perf_counter() - start, recorded).frame())

    def do_precompile(self, header: dict[str, Any], tensors: list[torch.Tensor]) -> None:
        """Compiles, at once, the Triton kernels the version launches on each set of inputs (harness.gpu.precompile)."""

        if triton is None or isinstance(self.entry, ModelCall):
            wire.send(self.sock, messages.Failure("not a Triton version").frame())
        else:
            cases = messages.PrecompileRequest.from_header(header).cases
            wire.send(self.sock, compile_cases(self.entry, list(cases), tensors, self.cuda).frame())

    def do_share(self, header: dict[str, Any], _: list[torch.Tensor]) -> None:
        """The judge's block of shared memory (its descriptor follows the frame): from now on the large tensors
        of requests and replies lie in it. Answers the bytes the judge wrote at its start, as this side sees them."""
        request = messages.ShareRequest.from_header(header)
        try:
            block = shared_block.accept(self.sock, str(request.kind), request.size)
        except shared_block.ShareError as exc:
            wire.send(self.sock, messages.Failure(str(exc)).frame())
            return
        if self.block is not None:
            self.block.close()
        self.block = block
        wire.send(self.sock, messages.ShareReply(shared_block.read_probe(block)).frame())

    def do_ping(self, header: dict[str, Any], _: list[torch.Tensor]) -> None:
        wire.send(self.sock, messages.PingReply().frame())

    def do_once(self, header: dict[str, Any], tensors: list[torch.Tensor], timer: Any = TIMING) -> None:
        """One call, then the whole device idle, then the answer: the judge times this from its own side, so
        it bounds from below what the version's timings may say. On the last bench inputs, or `inputs`."""
        self._call_for_outside(header, tensors, timer, wait=True)

    def do_launch(self, header: dict[str, Any], tensors: list[torch.Tensor], timer: Any = TIMING) -> None:
        """One call answered as soon as it returns (the device is waited for after the answer): what a call
        costs on the host, which the judge takes off `once` so that launch overhead is not read as GPU time."""
        self._call_for_outside(header, tensors, timer, wait=False)

    def _call_for_outside(self, header: dict[str, Any], tensors: list[torch.Tensor], timer: Any, wait: bool) -> None:
        request = (messages.OnceRequest if wait else messages.LaunchRequest).from_header(header)
        inputs = self.materialize(request.inputs, tensors) if request.inputs is not None else self.bench_inputs
        cuda = self.device.type == "cuda"
        try:
            if cuda:
                timer.synchronize()  # the device idle before the call, as the judge's clock starts
            self.entry(*inputs)
            if cuda and wait:
                timer.synchronize()
        except BaseException as exc:
            self.reply_error(exc, request.op)
            return
        wire.send(self.sock, (messages.OnceReply() if wait else messages.LaunchReply()).frame())
        if cuda and not wait:
            with contextlib.suppress(Exception):  # a fault is sticky: the next request reports it
                timer.synchronize()

    def do_outside(self, header: dict[str, Any], tensors: list[torch.Tensor], timer: Any = TIMING) -> None:
        """Calls on one case for a profiler outside this process (harness.judge.nsight.timing): one call to compile and
        tune, then `calls` calls, each alone in an NVTX range named by the judge (the only kernels it profiles)
        after the L2 eviction the timed calls get: back to back, one call's dirty lines would be written back
        during the next, and the figure would not be the one the timings are compared with."""
        request = messages.OutsideRequest.from_header(header)
        inputs = self.materialize(request.inputs, tensors)
        try:
            self.entry(*inputs)
            timer.synchronize()
            # over places in device memory as the timed calls rotate, else the figures are of other placements
            call = timer.rotating(self.entry, timer.placed_copies(inputs) if self.cuda else [inputs], [])
            if NVTX_PUSH is None or NVTX_POP is None:
                raise RuntimeError("this torch has no NVTX (a CPU build)")
            if self.flush is None:
                self.flush = timer.flush_buffer(self.device)
            for _ in range(int(request.calls)):
                timer.evict_l2(self.flush)
                timer.synchronize()
                NVTX_PUSH(str(request.range))
                call()
                timer.synchronize()
                NVTX_POP()
        except BaseException as exc:
            self.reply_error(exc, "call")
            return
        wire.send(self.sock, messages.OutsideReply().frame())

    def do_regions(self, header: dict[str, Any], tensors: list[torch.Tensor], timer: Any = TIMING) -> None:
        """One call with proton instrumenting the regions the version marks in its kernels (harness.worker.regions),
        after one plain call (its compile and autotuning stay out of the instrumented one)."""
        from harness.worker import regions as in_kernel

        inputs = self.materialize(messages.RegionsRequest.from_header(header).inputs, tensors)
        try:
            self.entry(*inputs)
            timer.synchronize()
            regions = in_kernel.record(lambda: self.entry(*inputs), timer.synchronize, Path("proton-regions"))
        except BaseException as exc:
            self.reply_error(exc, "regions")
            return
        wire.send(self.sock, messages.RegionsReply(regions).frame())

    def do_bench(self, header: dict[str, Any], tensors: list[torch.Tensor], timer: Any = TIMING) -> None:
        request = messages.BenchRequest.from_header(header)
        phases = Phases()
        with phases("inputs"):
            if not (request.same_inputs and self.bench_inputs):  # sent once for rounds timed again
                self.bench_inputs, self.placements = (), [()]  # the last case's copies freed first
                self.bench_inputs = self.materialize(request.inputs, tensors)
                self.placements = timer.placed_copies(self.bench_inputs) if self.cuda else [self.bench_inputs]
            inputs = self.bench_inputs
            if self.flush is None:
                self.flush = timer.flush_buffer(self.device)
        last: list[Any] = [None]
        used: list[int] = []  # the placement each call took
        rotation = timer.rotating(self.entry, self.placements, used)

        def call() -> None:
            last[0] = rotation()

        extra: dict[str, Any] = {}
        try:
            if not request.race:  # a race round: the version was recorded and settled in its benchmark
                # one call on the bench case, recorded, ahead of the timed ones
                with phases("recorded call"), RECORDER.recording(inputs, self.profiler is None, self.held()):
                    outputs = check_outputs(self.entry(*inputs))
                extra["recorded"] = RECORDER.report(outputs)
            with phases("timed calls"):
                budget_s = float(request.budget_s)
                samples, extra["timed_watch"] = watched(call, self.flush, timer, budget_s, self.cuda, self.watch_note)
                extra["placement_of"] = tuple(used[-len(samples) :]) if len(self.placements) > 1 else ()
            if not request.race:
                with phases("settled calls"):
                    settled = timer.settled_calls(call, self.flush)
                    extra.update(zip(messages.BenchReply.settled, map(tuple, settled), strict=True))
        except BaseException as exc:
            self.reply_error(exc, "bench")
            return
        if not request.race:  # a race is decided on the rounds' event medians; CUPTI's pass cost 0.08-0.26 s a round
            with phases("device times"):
                places = len(self.placements)
                flush = self.flush if self.cuda else None
                extra.update(device_times(call, min(samples), timer, flush, self.profiler, places))
                if places > 1 and extra.get("device_ms"):
                    extra["device_placement_of"] = tuple(used[-len(extra["device_ms"]) :])

        def reply(refs: tuple[int, ...], after: Any, _: tuple[torch.Tensor, ...]) -> messages.BenchReply:
            return messages.BenchReply(refs, tuple(samples), after, **extra, phases_s=phases.seconds)

        # returned None: its outputs are in the output buffers among the last call's inputs, sent back for the
        # judge to pick
        self.send_outputs(last[0], self.placements[used[-1]] if last[0] is None else None, reply)

    def materialize(self, tree: Any, tensors: list[torch.Tensor]) -> tuple[Any, ...]:
        moved = [t if t.device.type == "meta" else t.to(self.device) for t in tensors]
        inputs = wire.decode_tree(tree, moved)
        inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
        if isinstance(self.entry, ModelCall):
            # ModelNew built and given the weights now, outside the recorded and timed calls; should that fail,
            # the call builds it again and reports the error as the version's
            with contextlib.suppress(Exception):
                self.entry.prepare(inputs)
        return inputs

    def send_outputs(self, out: Any, inputs: tuple[Any, ...] | None, reply: OutputsReply) -> None:
        """The call's outputs (and `inputs` as it left them, where given) sent back in `reply(indices of the
        outputs among the frame's tensors, the inputs' encoded tree or None, the outputs)`."""
        try:
            outputs = check_outputs(out)
        except TypeError as exc:
            wire.send(self.sock, messages.Failure(str(exc), stage="output").frame())
            return
        tensors: list[torch.Tensor] = list(outputs)
        after = wire.encode_tree(list(inputs), tensors) if inputs is not None else None
        header = reply(tuple(range(len(outputs))), after, outputs).frame()
        try:
            share = shared_block.Placement(self.block) if self.block and self.shared_reply else None
            wire.send(self.sock, header, tensors, share=share)
        except BaseException as exc:
            wire.send(self.sock, describe_exception(exc, self.path, "output").frame())


def install_hooks(mode: str, arch: str, dsls: tuple[str, ...], cuda: bool) -> bool:
    """Before a version is imported: the compile-only stand-ins (mode `compile`, or TileLang with no GPU) and the
    recorder's hooks for each DSL it uses. Whether it uses CuTeDSL."""
    from harness.gpu import aot

    if mode == "compile" and triton is not None:
        aot.install_triton(aot.parse_arch(arch)[0])
    cutedsl = "cutedsl" in dsls
    if mode == "compile" and cutedsl:
        aot.install_cutedsl()
    tilelang = "tilelang" in dsls
    if tilelang:  # with no GPU the run worker only compiles too: a version may compile as it is imported
        from harness.worker import tilelang_hooks

        compile_only = mode == "compile" or not cuda
        tilelang_hooks.install(aot.parse_arch(arch)[1] if compile_only else None)
    RECORDER.install()  # after the compile-only stand-ins: launches are recorded either way
    if cutedsl:
        RECORDER.install_cutedsl()
    if tilelang:
        RECORDER.install_tilelang()
    return cutedsl


def entry_of(module: Any, path: Path, device: torch.device) -> Any:
    """The version's custom_kernel, or its ModelNew called as one (KernelBench's form, harness.problem.kernelbench)."""
    entry = getattr(module, ENTRY, None)
    model_new = getattr(module, MODEL_ENTRY, None)
    if entry is None and isinstance(model_new, type):
        entry = ModelCall(model_new, device)
    if entry is None:
        names = sorted(n for n in vars(module) if not n.startswith("_") and callable(vars(module)[n]))
        raise VersionError(
            f"{path.name} defines no {ENTRY}(*inputs) nor class {MODEL_ENTRY} "
            f"(functions found: {', '.join(names) or 'none'})"
        )
    if not callable(entry):
        raise VersionError(f"{ENTRY} in {path.name} is a {type(entry).__name__}, not a function")
    return entry


def ready_message(mode: str, cuda: bool, profiler: str | None) -> messages.WorkerReady:
    """What the worker says once started, before any version: what confines it, whether its recorded calls run
    under torch's profiler ("on", or why not: `profiler`), Triton's warm-up on a GPU."""
    from harness.containment.sandbox import APPLIED  # what harness.containment.sandbox did before this module ran

    warmed = warm_triton() if mode == "run" and cuda and triton is not None else None
    # `monotonic` as it is sent: the judge's clock too, so how long it took to start
    return messages.WorkerReady(os.getpid(), cuda, mode, tuple(APPLIED), profiler, warmed, time.monotonic())


def device_times(
    call: Any, fastest_ms: float, timer: Any, flush: Any, profiler: str | None, places: int = 1
) -> dict[str, Any]:
    """{"device_ms": [...]} from CUPTI's kernel records, or {"device_note": why there are none}. A figure reported
    beside the event timings, not one a verdict rests on: torch's profiler is the version's to patch. `flush`:
    None with no GPU. `places`: the placements `call` rotates over, each given as many calls."""
    if flush is None:
        return {"device_note": "no GPU"}
    if profiler is not None:
        return {"device_note": f"torch's profiler is {profiler}"}
    reps = max(5, min(DEVICE_REPS, int(DEVICE_BUDGET_MS / max(fastest_ms, 1e-3))))
    reps = places * max(2, -(-reps // places)) if places > 1 else reps
    try:
        resting = timer.idle_us(fastest_ms)  # each call from a rested device, as the timed calls are
        device_ms = profiled.device_times(call, lambda: timer.rest(flush, resting), timer.synchronize, reps)
        return {"device_ms": device_ms}
    except Exception as exc:
        return {"device_note": f"CUPTI device times failed: {type(exc).__name__}: {str(exc)[:300]}"}


def watched(
    call: Any, flush: Any, timer: Any, budget_s: float, cuda: bool, why_not: str | None
) -> tuple[list[float], dict[str, Any]]:
    """The timed calls' samples, and on a GPU what CUPTI saw of them (harness.worker.kernel_watch): which kernels each
    call ran, and whether any kernel of this process ran outside its calls. `why_not`: why not to watch."""
    if not cuda or why_not is not None:
        return timer.time_calls(call, flush, budget_s=budget_s), {"note": "no GPU" if not cuda else why_not}
    watch = kernel_watch.KernelWatch()
    watch.start()
    try:
        samples = timer.time_calls(call, flush, budget_s=budget_s, watch=watch)
    finally:
        seen = watch.stop()
    return samples, seen


def warm_profiler(cuda: bool) -> str | None:
    """Starts torch's profiler once, before any version: None, or why recorded calls must do without it."""
    try:
        profiled.warm(cuda)
    except Exception as exc:
        return f"unavailable ({type(exc).__name__}: {str(exc)[:200]})"
    return None


def watch_check() -> str | None:
    """None when the timed calls' watch reads a plain call right here (harness.worker.kernel_watch.self_check)."""
    try:
        note = kernel_watch.self_check(TIMING)
    except Exception as exc:
        note = f"{type(exc).__name__}: {str(exc)[:200]}"
    return None if note is None else f"the timed calls' watch failed its check here: {note}"[:300]


def warm_triton() -> str:
    """Triton's runtime ready before any version (harness.worker.triton_warm): "ready", or why it is not."""
    try:
        from harness.worker import triton_warm

        triton_warm.warm_up()
    except Exception as exc:  # a broken Triton shows again, as the version's own error, in its compile rung
        return f"not warmed ({type(exc).__name__}: {str(exc)[:200]})"
    return "ready"


def check_outputs(out: Any) -> tuple[torch.Tensor, ...]:
    """Outputs must be plain tensors (or a tuple/list of them): subclasses could lie about their values. None:
    no outputs (the version wrote them into the output buffers among its inputs, where the problem has some)."""
    if out is None:
        return ()
    items = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    for i, item in enumerate(items):
        if not isinstance(item, torch.Tensor):
            raise TypeError(f"{ENTRY} returned {type(item).__name__} as output {i}; return torch tensors")
        if type(item) is not torch.Tensor:
            raise TypeError(f"output {i} is a {type(item).__name__} (a Tensor subclass); return plain torch tensors")
    return items


def poison(inputs: tuple[Any, ...], device: torch.device, byte: int = 0xFF) -> None:
    """Fills freed memory with `byte` (0xFF: NaN in every float) so a kernel that returns memory it never wrote
    shows garbage, and one called twice with two bytes shows it differing."""
    sizes = [t.numel() * t.element_size() for t in _leaves(inputs)]  # nested too: custom_kernel(data)
    if not sizes:
        return
    fill = int(byte) & 0xFF
    blocks = [torch.full((max(n, 1),), fill, dtype=torch.uint8, device=device) for n in [*sizes, sum(sizes)]]
    del blocks


def _leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _leaves(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _leaves(v)]
    return []


def import_version(path: Path) -> Any:
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("kerneltui_version", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["kerneltui_version"] = module
    spec.loader.exec_module(module)
    return module


def describe_exception(exc: BaseException, path: Path | None, stage: str) -> messages.Failure:
    """The error as a person wants it: file:line first, then the message; the trace as a log."""
    kind = error_kind(exc)
    where = locate(exc, path)
    if isinstance(exc, SystemExit):
        message = f"the version called sys.exit({exc.code!r})"
    elif isinstance(exc, VersionError):
        message = str(exc)
    elif isinstance(exc, SyntaxError):
        message = f"SyntaxError: {exc.msg}"
    elif getattr(exc, "error_message", None) and hasattr(exc, "node"):
        message = (
            f"{type(exc).__name__}: {getattr(exc, 'error_message', '')}"  # Triton's; its source excerpt goes to the log
        )
    else:
        message = f"{type(exc).__name__}: {str(exc).strip()}".strip()  # CuTeDSL's diagnostics start on a new line
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        message += f" ({FILE_LIMIT_HINT})"
    text = f"{where}: {message}" if where else message
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return messages.Failure(_uncoloured(text), kind, stage, _uncoloured(trace)[-MAX_TRACE_CHARS:])


_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def _uncoloured(text: str) -> str:
    """Without ANSI colour codes (CuTeDSL colours its diagnostics whatever the output): the judge would show
    each as an escaped \\x1b[91m."""
    return _COLOUR.sub("", text)


def error_kind(exc: BaseException) -> str:
    """compile (the kernel did not build), cuda (the device is in trouble), or python."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    module = type(exc).__module__ or ""
    if names & {"CompilationError", "OutOfResources", "PTXASError"} or module.startswith("triton.compiler"):
        return "compile"
    if module.startswith("cutlass") and not _raised_while_running(exc):
        return "compile"
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return "oom"
    if "CUDA error" in str(exc) or "AcceleratorError" in names:
        return "cuda"
    return "python"


def _raised_while_running(exc: BaseException) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    return any(f.name in ("run_compiled_program", "_load_cuda_library") for f in frames)


def locate(exc: BaseException, path: Path | None) -> str:
    """'v002.py:17' for the innermost frame in the version (or the kernel line of a Triton compile error)."""
    if path is None:
        return ""
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename) == path:
        return f"{path.name}:{exc.lineno}:{exc.offset or 0}"
    line = _triton_error_line(exc, path)
    if line:
        return f"{path.name}:{line}:{getattr(exc.node, 'col_offset', 0)}"  # type: ignore[attr-defined]
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f"{path.name}:{frames[-1].lineno}" if frames else ""


def _triton_error_line(exc: BaseException, path: Path) -> int | None:
    """Triton numbers a compile error's line from its kernel's `def`; map it back onto the file."""
    src, node = getattr(exc, "src", None), getattr(exc, "node", None)
    if not isinstance(src, str) or not hasattr(node, "lineno"):
        return None
    first = src.lstrip("\n").splitlines()[0].strip() if src.strip() else ""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for number, text in enumerate(lines, start=1):
        if first and text.strip() == first:
            return number + int(getattr(node, "lineno", 1)) - 1
    return None


def compile_cases(
    entry: Callable[..., Any], trees: list[Any], tensors: list[torch.Tensor], launchers: bool = False
) -> messages.PrecompileReply | messages.Failure:
    """harness.gpu.precompile.compile_ahead on the input sets a `precompile` request encodes, its tensors on the CPU
    (`launchers`: on a GPU, where the kernels will launch). On a GPU a bench case's shape-only (meta) inputs become
    CPU tensors never written (harness.gpu.precompile.untouched): a version's torch calls on meta tensors would
    import torch's symbolic shapes and sympy, a second and more, inside its correctness verdict. With no GPU they
    stay meta: the compile rung calls the version on them anyway."""
    from harness.gpu import precompile

    def placed(t: torch.Tensor) -> torch.Tensor:
        if t.device.type != "meta":
            return t.cpu()
        return precompile.untouched(t) if launchers else t

    on_cpu = [placed(t) for t in tensors]
    input_sets = []
    for tree in trees:
        inputs = wire.decode_tree(tree, on_cpu)
        input_sets.append(tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,))
    done = precompile.compile_ahead(entry, input_sets, precompile.threads(), launchers)
    if not done.get("ok"):
        return messages.Failure(str(done.get("why")))
    keys = tuple(tuple(found) for found in done["keys"])
    counts = done["kernels"], keys, done["failed_calls"], done["threads"], done["launchers"]
    return messages.PrecompileReply(done["seconds"], *counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--mode", choices=("run", "compile"), default="run")
    parser.add_argument("--arch", default="sm_90")
    args = parser.parse_args()
    from harness.containment.sandbox import die_with_parent

    die_with_parent()
    sock = socket.socket(fileno=args.fd)
    Worker(sock, args.mode, args.arch).serve()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
