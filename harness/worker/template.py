"""The template a judge forks its kernel workers from: torch and Triton imported once, not once per version.

`python -m harness.worker.template --fd N --slots FOLDER` runs where a worker would (inside bubblewrap where
there is one). It imports what a worker imports, runs no version code and initialises no GPU (the CUDA
driver does not survive a fork), then forks a worker on each request from the judge. A fork becomes:
- an outer process, the judge's handle on the worker: it tells the judge its pid (the kernel attaches it
  to its first byte on the worker's socket) and waits;
- a first process in new user, mount, pid and ipc namespaces (harness.containment.namespaces) that sees only its own
  worker folder, reaps whatever the version starts and reports the worker's exit status on a pipe;
- the worker, which confines itself as a freshly started one does (harness.containment.sandbox: the CUDA driver first
  where asked, then Landlock, seccomp, no capabilities, file limits) before it reads the version, and runs
  harness.worker.main.
The template keeps no state a worker could reach: every descriptor but its socket and log is closed in it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import runpy
import select
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from typing import NoReturn

from harness.containment import namespaces, sandbox
from harness.containment import watch as containment
from harness.contract.messages import ExitRequest, Failure, ForkReply, ForkRequest, TemplateReady

MAX_REQUEST_BYTES = 1 << 20
SETUP_FAILED = containment.FORK_SETUP_FAILED  # a fork whose set-up failed before the worker ran (said in its log)


def preimport() -> float:
    """What every worker imports, imported here once (harness.worker.main itself runs afresh in each fork, where its
    module-level choices, such as the Triton interpreter, are made): the seconds it took."""
    started = time.perf_counter()
    import torch  # noqa: F401

    with contextlib.suppress(ImportError):
        import triton
        import triton.runtime.interpreter  # noqa: F401

        hash_triton_install()
    from harness.wire import frames  # noqa: F401

    return round(time.perf_counter() - started, 3)


def hash_triton_install() -> None:
    """Triton's own cache key, a hash of its compiler's files and of libtriton (hundreds of MB read), computed here
    once for every fork: otherwise each worker's first compile pays 0.4-1.4 s for it. It depends on nothing but
    the installed files, so a version cannot shape what the forks inherit."""
    for module in ("triton.runtime.cache", "triton.compiler.compiler"):  # where Triton 3.6-3.9 / 3.2 define it
        with contextlib.suppress(ImportError, AttributeError, OSError):
            __import__(module, fromlist=["triton_key"]).triton_key()
            return


def serve(control: socket.socket, slots: str, pid_namespace: bool) -> None:
    while True:
        containment.reap_exited()  # workers' outer processes that ended (each said its status on its own pipe)
        ready, _, _ = select.select([control], [], [], 1.0)
        if not ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(control, MAX_REQUEST_BYTES, 3)
        except OSError:
            return
        if not data:
            return  # the judge is gone
        message = json.loads(data)
        if message.get("op") != ForkRequest.op or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            if message.get("op") == ExitRequest.op:
                return
            control.send(json.dumps(Failure("unknown request").frame()).encode())
            continue
        request = ForkRequest.from_header(message)
        try:
            reply: ForkReply | Failure = ForkReply(fork_worker(request, fds, control, slots, pid_namespace))
        except OSError as exc:
            reply = Failure(f"fork failed: {exc}")
        finally:
            for fd in fds:
                os.close(fd)
        control.send(json.dumps(reply.frame()).encode())


def fork_worker(request: ForkRequest, fds: list[int], control: socket.socket, slots: str, pid_namespace: bool) -> int:
    """`pid_namespace`: whether this box lets a fork have one (the template found out as it started)."""
    sock, log, status = fds
    pid = os.fork()
    if pid == 0:
        os.close(control.detach())  # the template's socket is never a worker's
        in_child(lambda: outer(request, sock, log, status, slots, pid_namespace), log)
    return pid


def in_child(body: Callable[[], int], log: int) -> NoReturn:
    """Runs `body` in a forked child and exits with its code: never back into the template's loop; what failed
    is said in `log` (the worker's, the judge reads it)."""
    containment.in_fork(body, log, "the worker's set-up")


def outer(request: ForkRequest, sock: int, log: int, status: int, slots: str, pid_namespace: bool) -> int:
    """The judge's handle on the worker: says its pid, enters the worker's namespaces, then waits beneath them as
    the subreaper of the tree and exits only once nothing is left in it (so no orphan keeps the worker's socket
    open out of the judge's sight)."""
    os.setsid()
    sandbox.die_with_parent()
    containment.become_subreaper()
    os.write(sock, b"\0")  # the judge reads this process's pid from it (SO_PASSCRED)
    notes, own_pids = [], False
    why = namespaces.unshare_all() if request.confine else "no namespaces of its own (--no-sandbox)"
    if why is None:
        hidden = namespaces.only_own_folder(slots, request.root, request.cover, (request.inbox,))
        own_pids = pid_namespace and namespaces.unshare_pid()
        kinds = "user, pid, mount and ipc" if own_pids else "user, mount and ipc"
        notes.append(f"own {kinds} namespaces" + (f"; {hidden}" if hidden else ""))
    elif request.confine:
        notes.append(why)
    first = os.fork()
    if first == 0:
        in_child(lambda: first_process(request, sock, log, status, notes, own_pids), log)
    for fd in (sock, log, status):
        os.close(fd)
    reap_until(first)
    end_beneath()
    return 0


def first_process(request: ForkRequest, sock: int, log: int, status: int, notes: list[str], pid_namespace: bool) -> int:
    """Reaps every process of the worker's tree, reports the worker's exit status, then ends the rest (in a pid
    namespace of its own, its exit alone would)."""
    sandbox.die_with_parent()
    if pid_namespace:
        namespaces.own_proc()
    else:
        containment.become_subreaper()  # a daemon the version starts stays beneath this process
    worker = os.fork()
    if worker == 0:
        in_child(lambda: become_worker(request, sock, log, notes), 2)  # 2: the log, once the worker set it up
    os.close(sock)
    os.close(log)
    code = reap_until(worker)
    with contextlib.suppress(OSError):
        os.write(status, (f"signal {-code}" if code < 0 else f"exit {code}").encode())
    end_beneath()
    return 0


def reap_until(child: int) -> int:
    """Reaps this process's children (orphans included, where it is their subreaper) until `child` has exited:
    its exit code (-N: killed by signal N)."""
    while True:
        try:
            pid, wait_status = os.waitpid(-1, 0)
        except ChildProcessError:
            return -signal.SIGKILL  # reaped already: nothing more to know
        except InterruptedError:
            continue
        if pid == child:
            return os.waitstatus_to_exitcode(wait_status)


def end_beneath() -> None:
    """Ends everything left beneath this process and reaps it; returns once nothing is (a fork loop races a
    single pass, and its orphans come back here)."""
    while True:
        containment.kill_all(containment.tree(os.getpid(), containment.processes())[1:])
        try:
            os.waitpid(-1, 0)
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def become_worker(request: ForkRequest, sock: int, log: int, notes: list[str]) -> int:
    """Output to the judge's log, nothing else open, the worker's environment and folder; confined; then the
    worker, as `python -m harness.containment.sandbox ... harness.worker.main` runs it."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    containment.close_all_but({0, 1, 2, sock})
    os.environ.clear()
    os.environ.update(request.env)
    tempfile.tempdir = None
    os.chdir(request.scratch)
    if request.cuda_first:
        sandbox.init_cuda()
    if request.confine:
        applied = sandbox.confine_self(request.scratch, tuple(request.reads), request.max_file_bytes)
    else:
        applied = ["none: disabled (--no-sandbox)"]
        if request.max_file_bytes:
            sandbox.limit_file_size(request.max_file_bytes)
    sandbox.APPLIED[:] = [*notes, *applied]
    sys.argv = ["harness.worker.main", "--fd", str(sock), "--mode", request.mode, "--arch", request.arch]
    runpy.run_module("harness.worker.main", run_name="__main__", alter_sys=True)
    return 0  # harness.worker.main exits by itself; a return is not the way it ends


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.worker.template", description=__doc__)
    parser.add_argument("--fd", type=int, required=True, help="the judge's control socket (SOCK_SEQPACKET)")
    parser.add_argument("--slots", required=True, help="the folder holding every worker's own folder")
    args = parser.parse_args()
    sandbox.die_with_parent()
    control = socket.socket(fileno=args.fd)
    import_s = preimport()
    pid_namespace = namespaces.pid_namespace_works()
    control.send(json.dumps(TemplateReady(os.getpid(), import_s, pid_namespace).frame()).encode())
    serve(control, args.slots, pid_namespace)


if __name__ == "__main__":
    main()
