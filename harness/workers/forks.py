"""The judge's side of harness.worker.template: one template process per pool, and a handle on each worker it forks.

A worker forked from the template is ready in tens of milliseconds where one started afresh imports torch
and Triton for seconds. The judge holds, for each, the pid the kernel gave with its first byte (so the
watch, the cgroup and kill() see its whole tree as they do a fresh worker's) and a pipe its first process
writes the worker's exit status to.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from harness.containment import watch as containment
from harness.contract.messages import ExitRequest, Failure, ForkRequest, MalformedReply, TemplateReady, TemplateRequest
from harness.contract.text import printable
from harness.workers import fork_server

MAX_REPLY_BYTES = 1 << 16
UCRED = struct.Struct("iII")  # pid, uid, gid


def file_tail(log: BinaryIO, chars: int) -> str:
    """The last `chars` bytes of an unnamed log file, read through its descriptor ("" where it is closed)."""
    try:
        size = os.fstat(log.fileno()).st_size
        return os.pread(log.fileno(), chars, max(0, size - chars)).decode(errors="replace")
    except (OSError, ValueError):
        return ""


class TemplateError(Exception):
    """The template did not start, or stopped answering; the message says why."""


class Template:
    """A worker template (its workers' folders in root/slots), talking on `control`, its output in `log`; `proc`:
    its process, a child of this one (started afresh) or of the fork server's (harness.workers.fork_server)."""

    def __init__(self, root: Path, log: BinaryIO, control: socket.socket, proc: subprocess.Popen[bytes] | NotChild):
        self.root = root
        self.slots = root / "slots"
        self.log = log
        self.control = control
        self.proc = proc
        self.lock = threading.Lock()
        self.ready: TemplateReady | None = None
        self.began = time.monotonic()
        self.ready_s: float | None = None  # from its start to its "ready"
        self.traced = False  # its start written to KERNELTUI_TRACE
        self.not_forked_because: str | None = None  # why the fork server did not start it, where it was asked

    @classmethod
    def started(cls, argv: list[str], env: dict[str, str], root: Path, log: BinaryIO) -> Template:
        """A template started afresh with `argv` (a Python, behind bubblewrap's argv where there is one): it
        imports torch and Triton itself."""
        (root / "slots").mkdir(parents=True, exist_ok=True)
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [*argv, "-m", "harness.worker.template", "--fd", str(child.fileno()), "--slots", str(root / "slots")]
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(child.fileno(),),
            start_new_session=True,
            env=env,
            cwd=root / "slots",
        )
        child.close()
        return cls(root, log, parent, proc)

    @classmethod
    def forked(cls, server: fork_server.ForkServer, request: TemplateRequest, root: Path, log: BinaryIO) -> Template:
        """A template the judge's fork server started in the sandbox `request` names, sharing the judge's torch.
        Raises ForkServerError where it could not."""
        (root / "slots").mkdir(parents=True, exist_ok=True)
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid = server.start_template(request, child.fileno(), log.fileno())
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        return cls(root, log, parent, NotChild(pid))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout: float) -> TemplateReady:
        with self.lock:
            if self.ready is None:
                try:
                    self.ready = TemplateReady.parse(self._reply(timeout, "starting"))
                    self.ready_s = time.monotonic() - self.began
                except MalformedReply as exc:
                    raise TemplateError(f"the worker template did not start properly: {exc}") from None
        return self.ready

    def fork(self, request: ForkRequest, worker_end: int, log_fd: int, timeout: float) -> ForkedProcess:
        """A worker forked with `request` (harness.worker.template's fields), talking on `worker_end` (the worker's
        end of
        the judge's socket pair) and writing to `log_fd`."""
        self.wait_ready(timeout)
        status_r, status_w = os.pipe()
        try:
            with self.lock:
                message = json.dumps(request.header()).encode()
                try:
                    socket.send_fds(self.control, [message], [worker_end, log_fd, status_w])
                except OSError as exc:
                    raise TemplateError(self._gone(f"asked to fork ({exc})")) from None
                reply = request.read_reply(self._reply(timeout, "forking a worker"))
        except MalformedReply as exc:
            os.close(status_r)
            raise TemplateError(f"the worker template answered a fork with {exc}") from None
        except BaseException:
            os.close(status_r)
            raise
        finally:
            os.close(status_w)
        if isinstance(reply, Failure):
            os.close(status_r)
            raise TemplateError(reply.err or "the template did not fork a worker")
        return ForkedProcess(status_r)

    def _reply(self, timeout: float, what: str) -> object:
        ready, _, _ = select.select([self.control], [], [], timeout)
        if not ready:
            self.kill()
            raise TemplateError(f"the worker template timed out after {timeout:g} s {what}")
        try:
            data = self.control.recv(MAX_REPLY_BYTES)
        except OSError as exc:
            raise TemplateError(self._gone(f"{what} ({exc})")) from None
        if not data:
            raise TemplateError(self._gone(what))
        try:
            return json.loads(data)
        except (ValueError, RecursionError):
            raise TemplateError(f"the worker template answered garbage {what}") from None

    def _gone(self, what: str) -> str:
        code = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = self.proc.wait(timeout=5)
        tail = self.log_tail()
        return f"the worker template exited (code {code}) {what}" + (f"\n{tail}" if tail else "")

    def log_tail(self, chars: int = 1500) -> str:
        return printable(file_tail(self.log, chars)).strip()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def close(self, grace: float = 1.0) -> None:
        if self.alive():
            with contextlib.suppress(OSError):
                self.control.send(json.dumps(ExitRequest().header()).encode())
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace)
        self.kill()
        self.control.close()
        self.log.close()
        if isinstance(self.proc, NotChild):
            self.proc.close()


class NotChild:
    """A process this one did not start (a template the fork server started), as subprocess.Popen is used here:
    pid, poll(), wait(), watched through a pidfd. Its exit code is not this process's to know: -1 once ended."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fd = os.pidfd_open(pid)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.wait(0) if self.returncode is None and _readable(self.fd, 0) else self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not _readable(self.fd, timeout):
                raise subprocess.TimeoutExpired(f"process {self.pid}", timeout or 0)
            self.returncode = -1
        return self.returncode

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _readable(fd: int, timeout: float | None) -> bool:
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    except (OSError, ValueError):
        return True  # closed: nothing more will come


class ForkedProcess:
    """A forked worker as a subprocess.Popen is used by the judge: pid (its outer process's, in the judge's pid
    namespace), poll(), wait(); the exit code from its first process (-N: killed by signal N; its tree killed
    before it could say: SIGKILL)."""

    def __init__(self, status_fd: int) -> None:
        self.status_fd = status_fd
        self.pid = 0
        self.returncode: int | None = None

    def learn_pid(self, sock: socket.socket, timeout: float) -> None:
        """The pid the kernel attached to the worker's first byte (SO_PASSCRED), in this process's namespace."""
        ready, _, _ = select.select([sock], [], [], timeout)
        if not ready:
            raise TemplateError(f"the forked worker did not say its pid within {timeout:g} s")
        _, ancillary, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(UCRED.size))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 0)
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= UCRED.size:
                self.pid = UCRED.unpack(data[: UCRED.size])[0]
                return
        raise TemplateError("the forked worker's first byte came without its pid")

    def poll(self) -> int | None:
        if self.returncode is None:
            ready, _, _ = select.select([self.status_fd], [], [], 0)
            if ready:
                self._read()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            ready, _, _ = select.select([self.status_fd], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
            self._read()
        assert self.returncode is not None
        return self.returncode

    def _read(self) -> None:
        try:
            text = os.read(self.status_fd, 64).decode(errors="replace").split()
        except OSError:
            text = []
        os.close(self.status_fd)
        if len(text) == 2 and text[1].lstrip("-").isdigit():
            number = int(text[1])
            self.returncode = -number if text[0] == "signal" else number
        else:
            self.returncode = -signal.SIGKILL


class Templates:
    """A pool's template, started on first need and again where it died; known to the pool's watcher (not an
    escaped process). One serves every worker: Triton is imported to compile, and a worker that interprets
    runs Triton's own @jit helpers interpreted (harness.worker.interpreter_fixes)."""

    def __init__(self, start: Callable[[], Template], watcher: containment.Watcher) -> None:
        self.start = start
        self.watcher = watcher
        self.running: Template | None = None
        self.lock = threading.Lock()

    def get(self) -> Template:
        with self.lock:
            template = self.running
            if template is not None and template.alive():
                return template
            if template is not None:
                self._end(template)
            with self.watcher.lock:  # known before a tick of the watcher can see it
                template = self.running = self.start()
                self.watcher.keep(template.proc.pid)
            return template

    def close(self) -> None:
        with self.lock:
            ended, self.running = self.running, None
        if ended is not None:
            self._end(ended)

    def _end(self, template: Template) -> None:
        template.close()
        self.watcher.unkeep(template.proc.pid)
        shutil.rmtree(template.root, ignore_errors=True)
