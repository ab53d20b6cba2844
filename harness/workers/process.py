"""Starting, talking to, and ending kernel worker processes (the judge's side of harness.worker.main).

Each worker is a fresh Python process in its own session (so it and anything it starts can be
killed together), with a scratch folder, a log file for whatever the version prints, a minimal
environment (no API keys), and one socket to the judge. A pool keeps one started ahead of need.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.containment import watch as containment
from harness.containment.sandbox import FILE_LIMIT_HINT, cuda_device_count
from harness.contract.messages import (
    ExitRequest,
    Failure,
    ForkRequest,
    MalformedReply,
    R,
    Request,
    ShareRequest,
    TemplateRequest,
    WorkerReady,
)
from harness.contract.text import printable
from harness.workers import fork_server, forks, leftovers  # ctypes and the standard library only
from harness.workers.env import link_harness, passed_env, worker_env

if TYPE_CHECKING:
    from typing import TypeAlias

    import torch

    Tensors: TypeAlias = list[torch.Tensor]

# No torch or wire import at module level: the judge starts its workers before it imports torch
# itself, so that both imports overlap.

READY_TIMEOUT_S = 180.0
TRACE = os.environ.get("KERNELTUI_TRACE")  # a file: one JSON line per request to a worker, with its seconds
LOG_TAIL_CHARS = 1500
MEMORY_HINT = "the box ran out of memory while it ran (the version's allocations, or others' on this box)"


class WorkerFailure(Exception):
    """The worker died, hung, or sent garbage; the message is the plain reason."""


@dataclass(frozen=True)
class Wrapper:
    """A tool a worker runs under, inside its sandbox (Nsight Compute, compute-sanitizer): its argv up to the Python
    interpreter, where "{out}" stands for a judge-owned folder the tool writes (the confined version cannot), the
    folders it reads, and variables it wants in the worker's environment."""

    argv: tuple[str, ...]
    reads: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Spawn:
    """How a pool starts its workers."""

    python: str = sys.executable
    arch: str = "sm_90"
    cute_arch: str = "sm_90a"
    confine: bool = True
    max_file_bytes: int = 512 << 20
    limits: containment.Limits = field(default_factory=containment.Limits.default)
    # Initialise the CUDA driver before confinement (run-mode workers on a GPU box): some drivers talk to a
    # daemon over a socket at cuInit, which the sandbox then refuses.
    cuda_first: bool = False
    wrapper: Wrapper | None = None
    # Fork workers from a template that imported torch and Triton once (harness.worker.template): ready in tens of
    # milliseconds, not seconds. Off: each worker is a fresh process (as one under a wrapper always is).
    fork: bool = True


class WorkerProcess:
    """One worker: a judge-owned folder holding `scratch` (the worker's to write), `inbox` (the version the
    judge copies in; read-only to the worker) and `pkg` (the harness link), and the worker's log, which the
    judge reads through its own descriptor, never by a name the worker could swap."""

    def __init__(self, mode: str, spawn: Spawn, interpret: bool, template: forks.Template | None = None) -> None:
        self.mode = mode
        self.started = time.monotonic()
        self.oom_before = containment.oom_kills()
        self.root = worker_folder(mode, template)
        self.scratch = self.root / "scratch"
        self.inbox = self.root / "inbox"
        self.out = self.root / "out"  # a wrapper's, never the version's to write
        for sub in ("tmp", "triton", "nv", "cute", "cute-cache"):
            (self.scratch / sub).mkdir(parents=True)
        self.inbox.mkdir()
        self.out.mkdir()
        offer = containment.probe() if spawn.confine else None
        self.level = offer.level if offer else "none"
        self.forked = template is not None
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  (unnamed: the worker cannot point it elsewhere)
        parent, child = socket.socketpair()
        self.sock = parent
        try:
            if template is not None:
                self.proc: subprocess.Popen[bytes] | forks.ForkedProcess = fork_from(
                    self, template, spawn, interpret, child
                )
            else:
                self.proc = start_fresh(self, spawn, interpret, offer, child)
        except BaseException:
            self.sock.close()
            self.log.close()
            self.remove_scratch()
            raise
        finally:
            child.close()
        if TRACE:  # how many workers a run starts, and when (benchmarks/verdict_latency.py, the test suite's count)
            _trace(mode, {"op": "start"}, {}, f"pid {self.proc.pid}" + (" forked" if self.forked else ""), 0.0)
        cgroup = offer.cgroup if offer else None
        self.watch = containment.Watch(self.proc.pid, self.scratch, spawn.limits, cgroup, root_reaps=self.forked)
        self.ready: WorkerReady | None = None
        self.compiled_before_version: set[str] = set()  # Triton cache groups present when it said it was ready
        self.block: Any = None  # a harness.wire.shared_block block the worker maps too, once a request needs one
        self.share_note: str | None = None  # why large tensors go through the socket, where sharing failed
        self.loaded = False  # a version was sent to it: from then on its process is the version's
        self.frozen = False

    def wait_ready(self) -> WorkerReady:
        if self.ready is None:
            waited = time.perf_counter()
            header, _ = self._recv(READY_TIMEOUT_S, "starting")
            try:
                ready = WorkerReady.parse(header)
            except MalformedReply as exc:
                raise WorkerFailure(f"the worker did not start properly ({exc})") from None
            if TRACE:  # a verdict that waits on a worker still starting (too few spares) shows as this
                age = time.monotonic() - self.started
                start_s = round(ready.monotonic - self.started, 4)  # the worker's CLOCK_MONOTONIC: the same clock
                what = f"started {age:.2f} s before"
                _trace(self.mode, {"op": "ready"}, {}, what, time.perf_counter() - waited, {"start_s": start_s})
            self.ready = ready
            self.watch.adopt()
            from harness.wire import scratch  # the worker's own compiles (its Triton warm-up), before any version's

            self.compiled_before_version = {e.name for e in scratch.entries(self.scratch, "triton")}
        return self.ready

    @property
    def profiles_calls(self) -> bool:
        """Whether the worker said, before any version ran, that its recorded calls run under torch's profiler."""
        return self.ready is not None and self.ready.profiler == "on"

    @property
    def containment(self) -> str:
        """What contains this worker: the judge's launch level and what the worker applied to itself
        before it read a version (reported in its ready message, sent before any version code ran)."""
        parts = list(self.ready.sandbox) if self.ready is not None else []
        return "; ".join([f"{self.level}", *parts]) if parts else self.level

    def copy_in(self, source: bytes, name: str) -> Path:
        """The version as the judge read it (and hashed it), where the worker imports it from."""
        target = self.inbox / name
        target.write_bytes(source)
        return target

    def ask(
        self, request: Request[R], tensors: Tensors | None, timeout: float, what: str, max_payload: int = 1 << 36
    ) -> tuple[R | Failure, Tensors]:
        """`request` sent, its reply read as its message (harness.contract.messages), with the reply's tensors. A
        reply that is not that message is the worker's failure (it is killed: its channel can no longer be trusted)."""
        raw, tensors_back = self.request(request.header(), tensors, timeout, what, max_payload)
        try:
            return request.read_reply(raw), tensors_back
        except MalformedReply as exc:
            raise self._malformed(exc, what) from None

    def request(
        self,
        header: dict[str, Any],
        tensors: list[torch.Tensor] | None,
        timeout: float,
        what: str,
        max_payload: int = 1 << 36,
    ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        from harness.wire import frames as wire

        self.wait_ready()
        self.thaw()
        self.loaded |= header.get("op") == "load"
        sent = time.perf_counter()
        share = self._placement(tensors or [], timeout)
        if self.block is not None:  # the reply's large tensors may come back through it too
            header = {**header, "shared_reply": True}
        try:
            wire.send(self.sock, header, tensors, share=share, deadline=time.monotonic() + timeout)
        except wire.ChannelTimeout:  # it stopped reading: its socket's buffer is full
            raise self._timed_out(timeout, what) from None
        except OSError:
            raise WorkerFailure(self.death_reason(what)) from None
        reply = self._recv(timeout, what, max_payload)
        if TRACE:
            _trace(self.mode, header, reply[0], what, time.perf_counter() - sent)
        return reply

    def freeze(self) -> None:
        """Stops the version's processes (nothing to do before a version was loaded) until the next request."""
        if self.loaded and not self.frozen and self.proc.poll() is None:
            self.watch.freeze()
            self.frozen = True

    def thaw(self) -> None:
        if self.frozen:
            self.watch.thaw()
            self.frozen = False

    def _placement(self, tensors: list[torch.Tensor], timeout: float) -> Any:
        """Where this request's large tensors go in the block shared with the worker (offered now, or a larger
        one, where the request needs it); None where they go through the socket."""
        from harness.wire import shared_block

        wanted = shared_block.bytes_to_share(tensors) if self.mode == "run" and not self.share_note else None
        if wanted is None:
            return None
        kind, size = wanted
        if self.block is None or self.block.kind != kind or self.block.size < size:
            self._drop_block()
            if shared_block.fits(kind, size):
                self._offer_block(kind, size, timeout)
        return shared_block.Placement(self.block) if self.block is not None else None

    def _offer_block(self, kind: str, size: int, timeout: float) -> None:
        sent = time.perf_counter()
        self.share_note = self._new_block(kind, size, timeout)
        if TRACE:
            ok = self.share_note is None
            what = kind if ok else f"{kind}: {self.share_note}"
            _trace(self.mode, {"op": "share"}, {"ok": ok}, what, time.perf_counter() - sent)

    def _new_block(self, kind: str, size: int, timeout: float) -> str | None:
        """Offers the worker a new block: None once it maps the same bytes (self.block), else why not."""
        from harness.wire import frames as wire
        from harness.wire import shared_block

        try:
            block = shared_block.allocate(kind, size)
        except shared_block.ShareError as exc:
            return str(exc)
        try:
            probe = shared_block.write_probe(block)
            fd = block.export()
            try:
                deadline = time.monotonic() + timeout
                wire.send(self.sock, ShareRequest(kind, block.size).header(), deadline=deadline)
                shared_block.send_fd(self.sock, fd, deadline)
            finally:
                os.close(fd)
            raw, _ = self._recv(timeout, "while sharing memory with it")
            reply = ShareRequest(kind, block.size).read_reply(raw)
        except BaseException as exc:
            block.close()
            if isinstance(exc, wire.ChannelTimeout):
                raise self._timed_out(timeout, "while sharing memory with it") from None
            if isinstance(exc, OSError):
                raise WorkerFailure(self.death_reason("while sharing memory with it")) from None
            if isinstance(exc, shared_block.ShareError):
                return str(exc)
            if isinstance(exc, MalformedReply):
                raise self._malformed(exc, "while sharing memory with it") from None
            raise
        if not isinstance(reply, Failure) and reply.probe == probe:
            self.block = block
            return None
        block.close()
        said = reply.err if isinstance(reply, Failure) else None
        return (said or "the worker does not see the judge's bytes in the shared block")[:300]

    def _drop_block(self) -> None:
        if self.block is not None:
            self.block.close()
            self.block = None

    def _recv(self, timeout: float, what: str, max_payload: int = 1 << 36) -> tuple[dict[str, Any], list[torch.Tensor]]:
        from harness.wire import frames as wire

        try:
            return wire.recv(self.sock, timeout=timeout, max_payload=max_payload, block=self.block)
        except wire.ChannelTimeout:
            raise self._timed_out(timeout, what) from None
        except wire.ChannelClosed:
            raise WorkerFailure(self.death_reason(what)) from None
        except (wire.ChannelError, OSError) as exc:
            self.kill()
            raise WorkerFailure(
                _joined("malformed reply from the kernel's process", what) + f" ({exc}); "
                "a version that writes to inherited file descriptors looks like this"
            ) from None

    def _malformed(self, exc: MalformedReply, what: str) -> WorkerFailure:
        """Kills the worker whose reply was not its message (its channel can no longer be trusted); the failure."""
        self.kill()
        return WorkerFailure(_joined("the kernel's process sent a malformed reply", what) + f" ({exc})")

    def _timed_out(self, timeout: float, what: str) -> WorkerFailure:
        """Kills the worker that did not answer, or stopped reading, in time; the failure to raise."""
        self.kill()
        return WorkerFailure(_joined(f"timed out after {timeout:g} s", what))

    def death_reason(self, what: str) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return _joined("the kernel's process stopped answering", what)
        note = self.watch.death_note()
        if note:
            return _joined(f"killed: it {note}", what)
        if self.level == "bwrap" and code > 128 and not self.forked:
            code = -(code - 128)  # bubblewrap exits 128+N for a child killed by signal N
        if containment.killed_for_memory(code, self.oom_before):
            reason = _joined(f"killed by the kernel's out-of-memory killer: {MEMORY_HINT}", what)
        elif code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            reason = _joined(f"crashed: {name}", what)
            if name == "SIGXFSZ":
                reason += f" ({FILE_LIMIT_HINT})"
        else:
            reason = _joined(f"the kernel's process exited early (code {code})", what) + ", without answering"
        tail = self.log_tail()
        return f"{reason}\n{tail}" if tail else reason

    def log_tail(self) -> str:
        """The end of what the worker printed (a log can be hundreds of MiB), control characters removed."""
        lines = forks.file_tail(self.log, 4 * LOG_TAIL_CHARS).splitlines()
        text = printable("\n".join(line for line in lines if not PROFILER_CHATTER.match(line))).strip()
        return text[-LOG_TAIL_CHARS:] if text else ""

    def kill(self) -> None:
        """The worker and everything it started, wherever in its tree (its own sessions included). The tree is
        taken whole first and ended while the watcher waits: killed from the top (bubblewrap), the processes
        under it were orphans for a moment, and a tick took them for a daemon the version started."""
        with self.watch.lock:
            if self.forked:  # its tree first, from below, while its outer process still takes in the orphans
                self.watch.kill()
            started = containment.tree(self.proc.pid, containment.processes())
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            containment.end_all(started)
            self.watch.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def ask_to_exit(self, grace: float) -> bool:
        """Asks the worker to exit and waits up to `grace` seconds: whether it (and any wrapper) did."""
        if self.proc.poll() is None:
            from harness.wire import frames as wire

            with contextlib.suppress(OSError, wire.ChannelTimeout):
                wire.send(self.sock, ExitRequest().header(), deadline=time.monotonic() + grace)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace)
        return self.proc.poll() is not None

    def close(self, grace: float = 2.0) -> None:
        self.thaw()
        self.ask_to_exit(grace)
        self.kill()
        self.watch.close()
        self.sock.close()
        self.log.close()
        self._drop_block()

    def remove_scratch(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        if self.forked:
            shutil.rmtree(self.root.with_name(f".cover-{self.root.name}"), ignore_errors=True)


def start_fresh(
    self: WorkerProcess, spawn: Spawn, interpret: bool, offer: containment.Offer | None, child: socket.socket
) -> subprocess.Popen[bytes]:
    """A fresh Python process for `self`: harness.containment.sandbox confines it, then runs harness.worker.main."""
    env = worker_env(self.root, self.mode, interpret, spawn.cute_arch)
    env.update(spawn.wrapper.env if spawn.wrapper else ())
    reads = [str(self.inbox), str(self.root / "pkg"), *(spawn.wrapper.reads if spawn.wrapper else ())]
    argv = [spawn.python, "-m", "harness.containment.sandbox", "--scratch", str(self.scratch)]
    argv += [arg for path in reads for arg in ("--read", path)]
    argv += ["--max-file-bytes", str(spawn.max_file_bytes)] + ([] if spawn.confine else ["--off"])
    argv += ["harness.worker.main", "--fd", str(child.fileno()), "--mode", self.mode, "--arch", spawn.arch]
    if spawn.cuda_first and self.mode == "run":
        argv.insert(argv.index("--scratch"), "--cuda-first")
    if spawn.wrapper:
        argv = [arg.replace("{out}", str(self.out)) for arg in spawn.wrapper.argv] + argv
    if offer and offer.bwrap:
        readable = sandbox_read_roots() + list(spawn.wrapper.reads if spawn.wrapper else ())
        prefix = containment.bwrap_prefix(offer.bwrap, self.root, readable, spawn.limits, offer.share_net)
        argv = prefix + argv
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=self.log,
        stderr=subprocess.STDOUT,
        pass_fds=(child.fileno(),),
        start_new_session=True,
        env=env,
        cwd=self.scratch,
    )


def fork_from(
    self: WorkerProcess, template: forks.Template, spawn: Spawn, interpret: bool, child: socket.socket
) -> forks.ForkedProcess:
    """A worker for `self` forked from the pool's template (harness.worker.template), confining itself as a fresh one
    does."""
    pkg = template.root / "pkg"
    request = ForkRequest(
        mode=self.mode,
        arch=spawn.arch,
        env=worker_env(self.root, self.mode, interpret, spawn.cute_arch, pkg=pkg),
        root=str(self.root),
        scratch=str(self.scratch),
        inbox=str(self.inbox),
        cover=str(make_cover(self.root)),
        reads=(str(self.inbox), str(pkg)),
        max_file_bytes=spawn.max_file_bytes,
        confine=spawn.confine,
        cuda_first=spawn.cuda_first and self.mode == "run",
    )
    self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # before its first byte: its pid comes with it
    try:
        proc = template.fork(request, child.fileno(), self.log.fileno(), READY_TIMEOUT_S)
        if TRACE and template.ready_s is not None and not template.traced:  # the first fork waited for it
            template.traced = True
            how = "forked by the judge's fork server" if isinstance(template.proc, forks.NotChild) else "afresh"
            _trace("template", {"op": "ready"}, {}, how, template.ready_s, {"start_s": round(template.ready_s, 4)})
        proc.learn_pid(self.sock, READY_TIMEOUT_S)
    except forks.TemplateError as exc:
        raise WorkerFailure(str(exc)) from None
    return proc


def worker_folder(mode: str, template: forks.Template | None) -> Path:
    """A worker's folder: in its template's, or (a fresh worker) in the temporary directory itself, claimed there,
    so that the next judge removes it if this one dies without doing so."""
    if template is not None:
        return Path(tempfile.mkdtemp(prefix=f"kerneltui-{mode}-", dir=template.slots))
    root = Path(tempfile.mkdtemp(prefix=f"kerneltui-{mode}-"))
    leftovers.claim(root)
    return root


def make_cover(root: Path) -> Path:
    """What a forked worker's mount namespace shows in place of every worker's folder: an empty folder named
    as its own, in an empty folder (harness.containment.namespaces.only_own_folder)."""
    cover = root.with_name(f".cover-{root.name}")
    (cover / root.name).mkdir(parents=True)
    return cover


def start_template(spawn: Spawn) -> forks.Template:
    """The worker template (harness.worker.template) for this pool's workers, contained as they are (bubblewrap where
    there is one); its workers confine themselves further once forked. Triton is imported to compile: a fork that
    interprets sets TRITON_INTERPRET before the version makes its kernels."""
    root = Path(tempfile.mkdtemp(prefix="kerneltui-template-"))
    leftovers.claim(root)
    pkg = root / "pkg"
    env = passed_env()
    env.update(
        PYTHONPATH=os.pathsep.join(p for p in (link_harness(pkg), env.get("PYTHONPATH")) if p),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        HOME=str(root / "slots"),
        TMPDIR=str(root / "slots"),
    )
    env.pop("TRITON_INTERPRET", None)
    offer = containment.probe() if spawn.confine else None
    prefix: list[str] = []
    if offer and offer.bwrap:
        prefix = containment.bwrap_prefix(
            offer.bwrap, root, sandbox_read_roots(), spawn.limits, offer.share_net, template=True
        )
    log = tempfile.TemporaryFile()  # noqa: SIM115  (the template's own output: read where it fails)
    server = fork_server.running()
    why = None
    if server is not None and spawn.python == sys.executable:
        request = TemplateRequest(tuple(prefix), spawn.python, env, str(root / "slots"))
        try:
            return forks.Template.forked(server, request, root, log)
        except fork_server.ForkServerError as exc:
            why = str(exc)
            log.write(f"kerneltui: started afresh, not by the judge's fork server: {why}\n".encode())
            log.flush()
    template = forks.Template.started([*prefix, spawn.python], env, root, log)
    template.not_forked_because = why
    return template


def sandbox_read_roots() -> list[str]:
    from harness.containment.sandbox import read_roots

    return read_roots()


# torch's profiler (Kineto) says when it starts and stops on stderr: noise in what a failing version printed.
PROFILER_CHATTER = re.compile(r"(USDT|INFO|WARNING):\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ \w+\.cpp:\d+\] ")


def _joined(text: str, what: str) -> str:
    return f"{text} {what}" if what else text


class WorkerPool:
    """Hands out workers started ahead of need; each serves one version, then is thrown away.

    `reap`: this process is a judge of its own (python -m harness), so it may be the subreaper of its
    workers' trees and end at once any process that leaves one (a daemon). Not in a process that starts
    other children in sessions of their own (a test runner): those would look escaped.
    """

    def __init__(self, spawn: Spawn | None = None, keep_spare: bool = False, reap: bool = False) -> None:
        self.cuda = cuda_device_count() > 0
        self.spawn = dataclasses.replace(spawn or Spawn(), cuda_first=self.cuda)
        self.keep_spare = keep_spare
        self.spares: dict[str, list[WorkerProcess]] = {}
        self.spares_lock = threading.Lock()  # the judge's idle timer retires spares from a thread of its own
        self.watcher = containment.Watcher(reap=reap)
        self.held: tuple[str, WorkerProcess] | None = None  # see hold()
        self.taken: set[WorkerProcess] = set()  # out of the pool until released: quiet() stops these
        self.templates = forks.Templates(lambda: start_template(self.spawn), self.watcher)
        if reap:  # a judge of its own: the folders of judges killed before they removed theirs go
            leftovers.sweep()

    def modes(self, rungs: Iterable[str] | None = None) -> list[str]:
        """The workers a version judged with `rungs` (None: any) takes. GPU: one runs everything. No GPU: one
        interprets, and the compile rung takes another that compiles ahead of time."""
        if self.cuda or (rungs is not None and "compile" not in rungs):
            return ["run"]
        return ["run", "compile"]

    def spares_wanted(self, mode: str) -> int:
        """On a GPU an evaluation takes two run workers (the version's, and the best's it races): both are
        started ahead, or the next evaluation waits seconds for a worker to start."""
        return 2 if self.cuda and mode == "run" and self.keep_spare else 1

    def prestart(self, rungs: Iterable[str] | None = None) -> None:
        """Starts the workers a version judged with `rungs` will take (None: every mode); a mode asked for later
        is started then, and kept spare from then on."""
        if self.spawn.fork:  # the template starts now; its spares are forked once they are ready, off this thread
            self.templates.get()
            threading.Thread(target=self._fill_spares, args=(self.modes(rungs),), daemon=True).start()
        else:
            self._fill_spares(self.modes(rungs))

    def _fill_spares(self, modes: list[str]) -> None:
        with self.spares_lock:
            for mode in modes:
                ready = self.spares.setdefault(mode, [])
                while len(ready) < self.spares_wanted(mode):
                    try:
                        ready.append(self._spawn(mode))
                    except WorkerFailure:
                        return  # the take() that needs one says why

    def take_wrapped(self, wrapper: Wrapper) -> WorkerProcess:
        """A run worker of its own under a tool (never a spare): released like the others."""
        with self.watcher.lock:
            worker = WorkerProcess("run", dataclasses.replace(self.spawn, wrapper=wrapper), interpret=True)
            self.watcher.add(worker.watch)
        with self.spares_lock:
            self.taken.add(worker)
        return worker

    def take(self, mode: str) -> WorkerProcess:
        with self.spares_lock:
            ready = self.spares.setdefault(mode, [])
            worker = ready.pop(0) if ready else self._spawn(mode)  # the oldest: the likeliest to be ready
            self.taken.add(worker)
            if self.keep_spare:
                while len(ready) < self.spares_wanted(mode):
                    ready.append(self._spawn(mode))
        return worker

    @contextlib.contextmanager
    def quiet(self, timed: WorkerProcess | None) -> Iterator[None]:
        """While something is timed (the reference in the judge, `timed`'s calls): every other worker holding a
        version stopped, so no thread of a version's loads the device or the CPU meanwhile."""
        with self.spares_lock:  # those frozen already (a parked evaluation's) stay frozen after
            others = [w for w in self.taken if w is not timed and not w.frozen]
        for worker in others:
            worker.freeze()
        try:
            yield
        finally:
            for worker in others:
                worker.thaw()

    def hold(self, key: str, worker: WorkerProcess) -> None:
        """Keeps `worker` across evaluations under `key` (the best version's worker, loaded once for every race
        against it, not started and loaded again for each), in place of the one held before."""
        with self.spares_lock:
            before, self.held = self.held, (key, worker)
        if before is not None and before[1] is not worker:
            self.release(before[1])

    def held_for(self, key: str) -> WorkerProcess | None:
        """The worker held under `key`, if it is still running; one that exited is released."""
        with self.spares_lock:
            held = self.held
            if held is None:
                return None
            if held[1].proc.poll() is None:  # running
                return held[1] if held[0] == key else None
            self.held = None
        self.release(held[1])
        return None

    def drop(self, worker: WorkerProcess) -> None:
        """Stops holding `worker` (it failed), and releases it."""
        with self.spares_lock:
            if self.held is None or self.held[1] is not worker:
                return
            self.held = None
        self.release(worker)

    def retire_spares(self) -> int:
        """Ends the spares and the held worker (each its own pages: tens of MB beside the template's torch and Triton,
        ~300 MB in all without the fork server), and the template: an idle judge keeps none. How many ended."""
        with self.spares_lock:
            retired = [w for ready in self.spares.values() for w in ready]
            retired += [self.held[1]] if self.held is not None else []
            self.spares.clear()
            self.held = None
        for worker in retired:
            self.release(worker)
        self.templates.close()  # Triton's pages and whatever torch's it copied: started again by the next version
        return len(retired)

    def _spawn(self, mode: str) -> WorkerProcess:
        if not self.spawn.fork:
            with self.watcher.lock:  # known to the watcher before any tick can see it
                worker = WorkerProcess(mode, self.spawn, interpret=mode == "run")
                self.watcher.add(worker.watch)
            return worker
        template = self.templates.get()
        worker = WorkerProcess(mode, self.spawn, interpret=mode == "run", template=template)
        self.watcher.add(worker.watch)  # the template's child, not this process's: no tick takes it for escaped
        return worker

    def release(self, worker: WorkerProcess) -> None:
        """Closes a worker that served its version, with everything it started, and removes its folder. Its tree
        is taken first and ended with it while the watcher waits: a child still running as the worker exits (a
        compiler it called, a fork loop being killed) is the worker's, not a process that escaped it; seen
        orphaned for a moment it was counted as an escape, and as the next version's once the sweep had run."""
        with self.spares_lock:
            self.taken.discard(worker)
        with self.watcher.lock:
            started = containment.tree(worker.proc.pid, containment.processes())
            worker.close()
            containment.end_all(started)
        self.watcher.remove(worker.watch)
        worker.remove_scratch()

    def sweep(self) -> int:
        """Ends processes that escaped the workers' trees; how many did since the last sweep."""
        return self.watcher.sweep()

    def close(self) -> None:
        with self.spares_lock:
            spares = [w for ready in self.spares.values() for w in ready]
            spares += [self.held[1]] if self.held is not None else []
            self.spares.clear()
            self.held = None
        for worker in spares:
            worker.close(grace=0.5)
            self.watcher.remove(worker.watch)
            worker.remove_scratch()
        self.templates.close()
        self.watcher.stop()


def trace_judge(step: str, seconds: float) -> None:
    """A line in the KERNELTUI_TRACE file for the judge's own work between requests (mode "judge")."""
    if TRACE:
        _trace("judge", {"op": step}, {}, step, seconds)


def _trace(
    mode: str,
    header: dict[str, Any],
    reply: dict[str, Any],
    what: str,
    seconds: float,
    extra: dict[str, Any] | None = None,
) -> None:
    """One line in the KERNELTUI_TRACE file: which request, how long from send to reply, and the worker's phases."""
    import json

    line = {
        **(extra or {}),
        "mode": mode,
        "op": header.get("op"),
        "what": what,
        "s": round(seconds, 4),
        "phases_s": reply.get("phases_s"),
        "ok": reply.get("ok"),
    }
    with contextlib.suppress(OSError), open(str(TRACE), "a") as out:
        out.write(json.dumps(line) + "\n")
