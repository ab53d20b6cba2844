"""The judge's fork server: worker templates that share the judge's torch instead of importing their own.

A template started afresh (harness.workers.forks.Template.started) imports torch for seconds and holds its own
~150 MB of torch's heap. The judge has already imported torch: `start()` forks it, once, before it starts a
thread or initialises CUDA, into a server that first wipes the judge's environment and command line from its
memory (every template and worker is its fork). Asked for a template, the server forks a process that:
- starts the sandbox's placeholder: bubblewrap, as it would start a template, running a Python that says it is
  up and waits for its stdin to close;
- joins the placeholder's namespaces (harness.containment.namespaces.join: user, pid, mount, net, ipc, uts),
  whose root is bubblewrap's, so the template it forks next sees what a template under bubblewrap sees;
- forks the template, which drops every capability, takes a session of its own and runs
  harness.worker.template as `python -m` would, its torch pages the judge's until either writes to them;
- waits for the template, then exits, which closes the placeholder's stdin: its pid namespace, and every
  worker in it, ends with it.
With no bubblewrap (Landlock's level), the template is forked with no sandbox to join, as one started afresh
would run. Where a step is refused (bubblewrap fails, the kernel refuses setns), the judge starts its template
afresh and the template's log says why.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from harness.containment import namespaces, sandbox, watch
from harness.contract.messages import Failure, MalformedReply, TemplateRequest, TemplateStarted

MAX_FRAME_BYTES = 1 << 20
START_TIMEOUT_S = 30.0
# The placeholder: bubblewrap's command, up once it has written a byte, gone once its stdin closes.
PLACEHOLDER = "import os; os.write(1, b'.'); os.read(0, 1)"


class ForkServerError(Exception):
    """The fork server could not start a template; the message says why."""


class ForkServer:
    """The judge's side: a socket to the server forked from it."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sys.stdout.flush()  # nothing of the judge's left in a buffer for the server to write
        gc.freeze()  # the collector would write to every object's header, in both processes: no page shared
        pid = os.fork()
        if pid == 0:
            ours.close()
            watch.in_fork(lambda: _serve(theirs), 2, "the judge's fork server")
        theirs.close()
        self.pid, self.control, self.lock = pid, ours, threading.Lock()

    def start_template(self, request: TemplateRequest, control: int, log: int) -> int:
        """A template started with `request`, talking on `control` and writing to `log`: its pid."""
        with self.lock:
            try:
                socket.send_fds(self.control, [json.dumps(request.header()).encode()], [control, log])
            except OSError as exc:
                raise ForkServerError(f"the fork server is gone ({exc})") from None
            ready, _, _ = select.select([self.control], [], [], START_TIMEOUT_S + 5)
            data = self.control.recv(MAX_FRAME_BYTES) if ready else b""
            if not data:  # a late answer would be read as the next request's: no next request (it then exits)
                self.control.close()
                raise ForkServerError("the fork server did not answer")
        try:
            reply = request.read_reply(json.loads(data))
        except (ValueError, RecursionError, MalformedReply) as exc:
            raise ForkServerError(f"the fork server answered garbage ({exc})") from None
        if isinstance(reply, Failure):
            raise ForkServerError(reply.err)
        return reply.pid

    def close(self) -> None:
        self.control.close()  # the server exits when its socket closes
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


_SERVER: list[ForkServer] = []


def start() -> None:
    """Forks this process's fork server (a judge, once torch is imported; before any thread or CUDA)."""
    if not _SERVER and sys.platform == "linux" and hasattr(os, "pidfd_open") and threading.active_count() == 1:
        _SERVER.append(ForkServer())


def running() -> ForkServer | None:
    return _SERVER[0] if _SERVER else None


# --- the server's side (a fork of the judge) ------------------------------------------------------------


def _serve(control: socket.socket) -> None:
    sandbox.die_with_parent()
    _resolve_harness_paths()
    forget_environment()
    forget_command_line()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)  # the judge's handlers are the judge's
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # the judge's stdout is its events' pipe: never written from here
    watch.close_all_but({0, 1, 2, control.fileno()})
    while True:
        watch.reap_exited()  # joiners whose template ended
        ready, _, _ = select.select([control], [], [], 1.0)
        if not ready:
            continue
        data, fds, _, _ = socket.recv_fds(control, MAX_FRAME_BYTES, 2)
        if not data:
            return  # the judge is gone
        try:
            request = TemplateRequest.from_header(json.loads(data))
            reply: TemplateStarted | Failure = TemplateStarted(_start(request, fds))
        except (OSError, ValueError, TypeError, ForkServerError) as exc:
            reply = Failure(f"the fork server could not start a template: {exc}")
        finally:
            for fd in fds:
                os.close(fd)
        control.send(json.dumps(reply.frame()).encode())


def forget_environment() -> None:
    """The judge's environment wiped from this process's memory, not only unset: every template and worker is a
    fork of this process, and a version can read its own memory. kerneltui gives its judge no secret, but a judge
    started by hand may hold an API key. The values go from the C strings (after each '=') and from the bytes
    os.environ keeps, which nothing here reads again; a template's environment comes with its request."""
    libc = ctypes.CDLL(None)
    libc.strlen.restype, libc.strchr.restype = ctypes.c_size_t, ctypes.c_void_p
    entries = ctypes.POINTER(ctypes.c_void_p).in_dll(libc, "environ")
    index = 0
    while entries and entries[index]:
        equals = libc.strchr(ctypes.c_void_p(entries[index]), ord("="))  # no copy of the string in Python's heap
        if equals:
            ctypes.memset(equals + 1, 0, libc.strlen(ctypes.c_void_p(equals + 1)))
        index += 1
    offset = bytes.__basicsize__ - 1  # where a bytes object's characters start (CPython)
    for value in os.environb.values():
        if len(value) > 1:  # a single byte is the interpreter's shared object for it: nothing secret fits
            ctypes.memset(id(value) + offset, 0, len(value))
    os.environ.clear()


def forget_command_line() -> None:
    """The judge's arguments and start-up folder out of what its forks inherit: sys.argv, sys.orig_argv, and the
    folder `-m` put first on sys.path (the judge's state folder, where kerneltui starts it). A version learns
    no path of the person's from them. (The judge's frames above this one still hold its parsed options: the
    workspace's path, which the agent writing the version knows anyway.)"""
    started_in = os.path.realpath(os.getcwd())
    sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != started_in]
    sys.argv[:] = ["harness.workers.fork_server"]
    sys.orig_argv[:] = [sys.executable, "-m", "harness.workers.fork_server"]


def _resolve_harness_paths() -> None:
    """The harness's packages found through the link the judge imported them by (kerneltui's runtime folder, in
    /tmp), which a template's sandbox does not show, resolved here, outside it: the sandbox shows the target."""
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").partition(".")[0] == "harness" and hasattr(module, "__path__"):
            module.__path__[:] = [os.path.realpath(p) for p in module.__path__]


def _reap_all(deadline_s: float) -> None:
    """Waits for every child (orphans included: this process is their subreaper) until none is left."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.01)
        except ChildProcessError:
            return


def _start(request: TemplateRequest, fds: list[int]) -> int:
    """Forks the process that joins the sandbox and forks the template: the template's pid, or why not."""
    if len(fds) != 2:
        raise ForkServerError("a template request comes with its socket and its log")
    said_r, said_w = os.pipe()
    joiner = os.fork()
    if joiner == 0:
        os.close(said_r)
        watch.in_fork(lambda: _join_and_fork(request, fds[0], fds[1], said_w), 2, "joining a template's sandbox")
    os.close(said_w)
    try:
        ready, _, _ = select.select([said_r], [], [], START_TIMEOUT_S)
        said = os.read(said_r, 4096).decode(errors="replace") if ready else "no answer in time"
    finally:
        os.close(said_r)
    if not said.isdigit():
        with contextlib.suppress(ProcessLookupError):
            os.kill(joiner, signal.SIGKILL)
        raise ForkServerError(said or "the process joining the sandbox ended without a word")
    return int(said)


def _join_and_fork(request: TemplateRequest, control: int, log: int, said: int) -> None:
    """The joiner: the placeholder started, its namespaces joined, the template forked; says the template's pid
    (or why not) on `said`, then waits for it."""
    sandbox.die_with_parent()
    watch.become_subreaper()  # bubblewrap's own first process outlives it: reaped here, not left to the judge
    hold, placeholder = -1, None
    try:
        if request.sandbox:
            hold, child_pid, placeholder = _placeholder(request, log)
            namespaces.join(child_pid)
        os.chdir(request.slots)
    except (OSError, ValueError, ForkServerError) as exc:
        os.write(said, f"joining the sandbox failed: {exc}".encode())
        return
    template = os.fork()
    if template == 0:
        os.close(said)
        if hold >= 0:
            os.close(hold)
        watch.in_fork(lambda: _become_template(request, control, log), log, "starting the template")
    os.write(said, str(template).encode())
    for fd in (said, control, log):
        os.close(fd)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(template, 0)
    if placeholder is not None:  # its stdin closed, the placeholder, bubblewrap and the pid namespace end
        os.close(hold)
        try:
            placeholder.wait(timeout=10)
        except subprocess.TimeoutExpired:
            placeholder.kill()
    _reap_all(deadline_s=5.0)  # left behind, they would go to the judge (their subreaper) and stay zombies there


def set_title(argv: list[str]) -> None:
    """What ps and /proc/PID/cmdline show for this process (a fork shows the judge's command line): written over
    the judge's arguments and environment strings (os.environ holds copies, which nothing else reads), NULs
    between the words where they fit in the arguments' space, else spaces. Best effort: a title only."""
    try:
        fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()  # noqa: SIM115
        arg_start, arg_end, env_start, env_end = (int(fields[i]) for i in (45, 46, 47, 48))
        words = [w.encode() for w in argv]
        title = b"\0".join(words) + b"\0"
        space = arg_end - arg_start
        if len(title) > space and env_start == arg_end:
            title, space = b" ".join(words) + b"\0", env_end - arg_start
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(arg_start)
            mem.write(title[: space - 1].ljust(space, b"\0"))
    except (OSError, ValueError, IndexError):
        pass


def _placeholder(request: TemplateRequest, log: int) -> tuple[int, int, subprocess.Popen[bytes]]:
    """bubblewrap started with the placeholder as its command: the placeholder's stdin (held open for as long as
    the template lives), the pid of bubblewrap's first process inside (whose namespaces are the sandbox's), and
    bubblewrap's process."""
    hold_r, hold_w = os.pipe()
    up_r, up_w = os.pipe()
    info_r, info_w = os.pipe()
    prefix = list(request.sandbox)
    if prefix[-1:] != ["--"]:
        raise ForkServerError("the sandbox's argv does not end with '--'")
    argv = [*prefix[:-1], "--info-fd", str(info_w), "--", request.python, "-I", "-S", "-c", PLACEHOLDER]
    proc = subprocess.Popen(argv, stdin=hold_r, stdout=up_w, stderr=log, pass_fds=(info_w,), close_fds=True)
    for fd in (hold_r, up_w, info_w):
        os.close(fd)
    ready, _, _ = select.select([up_r], [], [], START_TIMEOUT_S)
    up = os.read(up_r, 1) if ready else b""
    os.close(up_r)
    info = os.read(info_r, 4096) if up else b""
    os.close(info_r)
    if up != b".":
        proc.kill()
        raise ForkServerError(f"bubblewrap did not start (exit {proc.poll()}); see the template's log")
    child = json.loads(info).get("child-pid")
    if not isinstance(child, int) or child <= 0:
        raise ForkServerError(f"bubblewrap said no child pid: {info[:200]!r}")
    return hold_w, child, proc


def _become_template(request: TemplateRequest, control: int, log: int) -> None:
    """In the sandbox's namespaces: confined as bubblewrap confines its command, then harness.worker.template."""
    set_title([request.python, "-m", "harness.worker.template", "--fd", str(control), "--slots", request.slots])
    os.setsid()
    sandbox.die_with_parent()
    if request.sandbox:  # as bubblewrap leaves its command (a template started afresh outside one keeps them)
        sandbox.no_new_privs()
        sandbox.drop_capabilities()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    watch.close_all_but({0, 1, 2, control})
    os.environ.clear()
    os.environ.update(request.env)
    # what a fresh interpreter makes of the variables a template is given
    sys.path[:0] = [p for p in request.env.get("PYTHONPATH", "").split(os.pathsep) if p]
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True)
    sys.path_importer_cache.clear()
    sys.dont_write_bytecode = True
    tempfile.tempdir = None
    sys.argv = ["harness.worker.template", "--fd", str(control), "--slots", request.slots]
    runpy.run_module("harness.worker.template", run_name="__main__", alter_sys=True)
