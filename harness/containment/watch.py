"""How the judge contains a kernel's worker, and what this box offers for it.

Levels, best first: `bwrap` (bubblewrap: new user, pid, ipc, net, uts namespaces, a new session, read-only
binds of the Python environment and system libraries, a private scratch and /tmp, no home, only the
GPU's device nodes, dies with the judge), then `landlock` (harness.containment.sandbox alone: reads and writes
confined by the kernel, seccomp, no capabilities), then `none`. Inside bubblewrap harness.containment.sandbox runs
too, and a worker forked from a template (harness.worker.template) first enters namespaces of its own
(harness.containment.namespaces). At every level a Watch follows the worker's processes (memory, count, the scratch
folder's size;
through a cgroup v2 folder where one is delegated) and kills all of them when the version's
evaluation ends, daemons included: the judge is their subreaper, so nothing escapes its tree.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from harness.containment import sandbox

_PR_SET_CHILD_SUBREAPER = 36
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class Limits:
    memory_bytes: int
    processes: int = 256  # processes, not threads (torch alone starts one thread per core)
    scratch_bytes: int = 2 << 30
    shm_bytes: int = 1 << 30

    @classmethod
    def default(cls, memory_mb: float | None = None, file_mb: float = 512.0) -> Limits:
        memory = int(memory_mb * (1 << 20)) if memory_mb else max(4 << 30, physical_memory() // 2)
        return cls(memory_bytes=memory, scratch_bytes=max(int(4 * file_mb * (1 << 20)), 256 << 20))


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 << 30


@dataclass(frozen=True)
class Offer:
    """What this box offers for containing workers, and why not more."""

    bwrap: str | None
    bwrap_note: str
    landlock_abi: int
    cgroup: str | None
    cgroup_note: str
    share_net: bool = False  # bubblewrap keeps the host's network namespace (the GPU driver needs it)

    @property
    def level(self) -> str:
        return "bwrap" if self.bwrap else "landlock" if self.landlock_abi else "none"


@functools.cache
def probe() -> Offer:
    bwrap, share_net, bwrap_note = _probe_bwrap()
    cgroup, cgroup_note = _probe_cgroup()
    return Offer(bwrap, bwrap_note, sandbox.landlock_abi(), cgroup, cgroup_note, share_net)


CUINIT_PROBE = "import ctypes; print(ctypes.CDLL('libcuda.so.1').cuInit(0))"


def _probe_bwrap() -> tuple[str | None, bool, str]:
    """(bwrap's path or None, whether the network namespace must be shared, what it gives or why not).

    On a GPU box the CUDA driver is initialised inside a trial sandbox: some drivers reach a daemon over
    an abstract unix socket, which lives in the network namespace, and fail (CUDA error 304) in a new one.
    Then the host's network namespace is kept, and Landlock (no TCP) and seccomp (no new sockets) close it.
    """
    path = os.environ.get("KERNELTUI_BWRAP") or shutil.which("bwrap")
    if path == "none":
        return None, False, "bubblewrap is turned off (KERNELTUI_BWRAP=none)"
    if not path:
        return None, False, "bubblewrap is not installed (apt-get install bubblewrap, dnf install bubblewrap)"
    limits = Limits(memory_bytes=1 << 30)
    gpu = _cuda_devices_present()
    command = [sys.executable, "-c", CUINIT_PROBE] if gpu else ["true"]
    for share_net in (False, True) if gpu else (False,):
        argv = [*bwrap_prefix(path, Path("/"), [], limits, share_net=share_net, probe=True), *command]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, False, f"bubblewrap did not run: {exc}"
        if done.returncode != 0:
            why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
            hint = (
                " (user namespaces may be disabled: sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces)"
            )
            return None, False, f"bubblewrap cannot make a sandbox here: {why}{hint}"
        if not gpu or done.stdout.strip() == "0":
            if share_net:
                return path, True, "new user, pid, ipc and uts namespaces (the GPU driver needs the host's network one)"
            return path, False, "new user, pid, ipc, net and uts namespaces"
    return None, False, f"the GPU does not start inside bubblewrap here (cuInit: {done.stdout.strip()})"


def _cuda_devices_present() -> bool:
    return sandbox.cuda_device_count() > 0  # a few milliseconds: libcuda's own count


def bwrap_prefix(
    bwrap: str,
    root: Path,
    readable: list[str],
    limits: Limits,
    share_net: bool = False,
    probe: bool = False,
    template: bool = False,
) -> list[str]:
    """bubblewrap's argv up to the command: a new root holding only what the worker needs. `template`: for a
    worker template (harness.worker.template), whose root holds `slots` (its workers' folders) and `pkg`."""
    argv = [bwrap, "--unshare-all", *(["--share-net"] if share_net else []), "--die-with-parent", "--new-session"]
    if os.geteuid() == 0:
        argv += ["--cap-drop", "ALL"]
    if probe:
        argv += ["--ro-bind", "/", "/"]
    argv += ["--size", str(limits.shm_bytes), "--tmpfs", "/tmp"]  # first: the scratch folder lies beneath /tmp
    argv += ["--dev", "/dev", "--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm", "--proc", "/proc"]
    for device in sandbox.gpu_devices():
        argv += ["--dev-bind-try", device, device]
    if probe:
        return argv
    argv += bind_arguments(readable)
    if template:
        slots, pkg = str(root / "slots"), str(root / "pkg")
        return [*argv, "--bind", slots, slots, "--ro-bind", pkg, pkg, "--chdir", slots, "--"]
    scratch, inbox, pkg, out = (str(root / name) for name in ("scratch", "inbox", "pkg", "out"))
    argv += ["--bind", scratch, scratch, "--ro-bind", inbox, inbox, "--ro-bind", pkg, pkg, "--chdir", scratch]
    argv += ["--bind-try", out, out]  # a wrapper's output (Landlock keeps the version out of it)
    return [*argv, "--"]


def bind_arguments(readable: list[str]) -> list[str]:
    """Read-only binds of these paths, each once: a path inside another is already there (binding again onto
    a symlink inside it fails), and a symlink outside any is recreated as a symlink."""
    roots = sorted({os.path.normpath(p) for p in readable}, key=lambda p: (p.count("/"), p))
    kept: list[str] = []
    args: list[str] = []
    for path in roots:
        if any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            continue
        kept.append(path)
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        else:
            args += ["--ro-bind-try", path, path]
    return args


# --- cgroup v2 ----------------------------------------------------------------------------------


def _probe_cgroup() -> tuple[str | None, str]:
    mount = _cgroup2_mount()
    if mount is None:
        return None, "no cgroup v2 hierarchy is mounted"
    try:
        own = next(line[3:].strip() for line in Path("/proc/self/cgroup").read_text().splitlines() if line[:3] == "0::")
    except (OSError, StopIteration):
        return None, "this process's cgroup v2 folder is unknown"
    folder = Path(mount) / own.lstrip("/")
    try:
        enabled = set((folder / "cgroup.subtree_control").read_text().split())
        if not {"memory", "pids"} <= enabled:
            (folder / "cgroup.subtree_control").write_text("+memory +pids")
        trial = folder / f"kerneltui-probe-{os.getpid()}"
        trial.mkdir()
        ok = (trial / "memory.max").exists() and (trial / "pids.max").exists()
        trial.rmdir()
    except OSError as exc:
        return None, f"cgroup v2 folder {folder} is not delegated to this user ({exc.strerror or exc})"
    if not ok:
        return None, f"cgroup v2 folder {folder} lacks the memory and pids controllers"
    return str(folder), f"memory and process limits in {folder}"


def _cgroup2_mount() -> str | None:
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            if right.split()[:1] == ["cgroup2"]:
                return left.split()[4]
    except OSError:
        return None
    return None


class Cgroup:
    """One worker's cgroup: memory (no swap) and task limits; killing it kills every process in it."""

    def __init__(self, parent: str, limits: Limits) -> None:
        self.path = Path(parent) / f"kerneltui-{os.getpid()}-{time.monotonic_ns()}"
        self.path.mkdir()
        self._write("memory.max", str(limits.memory_bytes))
        self._write("memory.swap.max", "0")
        self._write("pids.max", str(16 * limits.processes))  # threads count here

    def _write(self, name: str, value: str) -> None:
        with contextlib.suppress(OSError):
            (self.path / name).write_text(value)

    def adopt(self, pids: list[int]) -> None:
        for pid in pids:
            self._write("cgroup.procs", str(pid))

    def oom_killed(self) -> bool:
        try:
            events = dict(line.split() for line in (self.path / "memory.events").read_text().splitlines())
        except (OSError, ValueError):
            return False
        return int(events.get("oom_kill", "0")) > 0

    def freeze(self, frozen: bool) -> bool:
        """Freezes (or thaws) every process in it at once; whether the kernel took it."""
        try:
            (self.path / "cgroup.freeze").write_text("1" if frozen else "0")
            return True
        except OSError:
            return False

    def kill(self) -> None:
        if (self.path / "cgroup.kill").exists():
            self._write("cgroup.kill", "1")
            return
        with contextlib.suppress(OSError, ValueError):
            for pid in (self.path / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(pid), signal.SIGKILL)

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                self.kill()
                time.sleep(0.02)


# --- processes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    sid: int
    rss_bytes: int
    zombie: bool


def stat_fields(pid: int | str) -> list[str] | None:
    """/proc/<pid>/stat's fields from the third (the state) on; None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode(errors="replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()  # the command name may hold spaces and parentheses


def processes() -> dict[int, Proc]:
    """Every process this one can see, from /proc/<pid>/stat."""
    found: dict[int, Proc] = {}
    for name in os.listdir("/proc"):
        fields = stat_fields(name) if name.isdigit() else None
        if fields and len(fields) > 21:
            pid = int(name)
            found[pid] = Proc(pid, int(fields[1]), int(fields[3]), int(fields[21]) * PAGE, fields[0] == "Z")
    return found


def tree(root: int, table: dict[int, Proc]) -> list[int]:
    """root and all its living descendants in table (zombies are only waiting to be reaped)."""
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in table and not table[pid].zombie:
            out.append(pid)
        todo += children.get(pid, [])
    return out


def live_tree(root: int) -> list[int]:
    """root and its living descendants, read from each one's /proc/<pid>/task/<tid>/children: a few small reads
    for a worker's tree where tree() reads every process on the box (the freeze around each timed step, on a
    box of hundreds of processes). The whole scan where the kernel has no such files."""
    if not os.path.exists(f"/proc/self/task/{os.getpid()}/children"):
        return tree(root, processes())
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        fields = stat_fields(pid)
        if fields is None or fields[0] == "Z":
            continue  # gone, or only waiting to be reaped (its children went to a subreaper)
        out.append(pid)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):  # a child is listed under the thread that forked it
                with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as handle:
                    todo += [int(child) for child in handle.read().split()]
    return out


def wait_stopped(pids: set[int], timeout_s: float = 0.5) -> None:
    """Returns once every thread of these processes is stopped (or gone): SIGSTOP takes effect a moment after
    kill() returns, and a thread still running on another CPU meanwhile would run beside what is timed."""
    deadline, pending = time.monotonic() + timeout_s, set(pids)
    while pending and time.monotonic() < deadline:
        pending = {pid for pid in pending if not _all_threads_stopped(pid)}
        if pending:
            time.sleep(0.0005)


def _all_threads_stopped(pid: int) -> bool:
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True  # gone
    for thread in threads:
        fields = stat_fields(f"{pid}/task/{thread}")
        if fields is not None and fields[0] not in ("T", "t", "Z", "X"):
            return False
    return True


def kill_all(pids: list[int]) -> None:
    signal_all(pids, signal.SIGKILL)


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def end_all(pids: list[int], wait_s: float = 2.0) -> None:
    """Kills these processes and waits (at most wait_s) until each is gone, reaping those that became ours."""
    kill_all(pids)
    left, deadline = set(pids), time.monotonic() + wait_s
    while left and time.monotonic() < deadline:
        for pid in list(left):
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            if not _alive(pid):
                left.discard(pid)
        if left:
            time.sleep(0.005)


def _alive(pid: int) -> bool:
    """Running or waiting to run: neither gone nor a zombie."""
    fields = stat_fields(pid)
    return fields is not None and fields[:1] not in (["Z"], ["X"])


FORK_SETUP_FAILED = 70  # the exit code of a forked child whose body raised (what failed is said in its log)


def in_fork(body: Callable[[], int | None], log: int, what: str) -> NoReturn:
    """Runs `body` in a forked child and exits with its code (None: 0), never returning into the code that forked
    it; where it raises, `what` failed, with the traceback, is written to `log` and the code is FORK_SETUP_FAILED."""
    code = FORK_SETUP_FAILED
    try:
        code = body() or 0
    except BaseException:
        with contextlib.suppress(OSError):
            os.write(log, f"kerneltui: {what} failed:\n{traceback.format_exc()}".encode())
    finally:
        os._exit(code)


def reap_exited() -> None:
    """Reaps this process's children that have exited, without waiting for the others."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def close_all_but(keep: set[int]) -> None:
    """Closes every descriptor of this process but those in `keep`."""
    kept = sorted(keep)
    for low, high in zip([-1, *kept], [*kept, os.sysconf("SC_OPEN_MAX")], strict=True):
        if high > low + 1:  # closerange(n, n) is close_range(n, n - 1): from 0, that is every descriptor
            os.closerange(low + 1, high)


def become_subreaper() -> None:
    """Orphans of this process's descendants (a version's daemon) are reparented here, not to init,
    so they stay findable and killable."""
    if sandbox._linux():
        sandbox._libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def escaped(known_children: set[int], table: dict[int, Proc]) -> list[int]:
    """Processes reparented to this judge (it is their subreaper) from a worker's tree: not children it
    started, and not in its own session (a worker's tree runs in sessions of its own)."""
    me, own_session = os.getpid(), os.getsid(0)
    return [p.pid for p in table.values() if p.ppid == me and p.pid not in known_children and p.sid != own_session]


def end_escaped(known_children: set[int]) -> int:
    """Kills what escaped (and what it started) and reaps it; returns how many there were."""
    count = 0
    for _ in range(20):
        table = processes()
        found = escaped(known_children, table)
        if not found:
            break
        for pid in found:
            kill_all(tree(pid, table))
        for pid in found:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
        count += len([pid for pid in found if not table[pid].zombie])
    return count


# --- the watch ----------------------------------------------------------------------------------


class Watch:
    """One worker's limits, checked from the judge (by the pool's Watcher) against its process tree."""

    def __init__(
        self, pid: int, scratch: Path, limits: Limits, cgroup_parent: str | None, root_reaps: bool = False
    ) -> None:
        self.pid, self.scratch, self.limits = pid, scratch, limits
        # The root is the subreaper of its tree (a forked worker's outer process): it is ended last, so whatever a
        # killed process leaves behind is reparented to it, inside the tree, not out of sight.
        self.root_reaps = root_reaps
        self.reason: str | None = None
        self.lock: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()  # its Watcher's, once added
        self.cgroup: Cgroup | None = None
        if cgroup_parent:
            with contextlib.suppress(OSError):
                self.cgroup = Cgroup(cgroup_parent, limits)

    def adopt(self) -> None:
        """Moves the worker's whole tree into its cgroup: called before the version is loaded."""
        if self.cgroup is not None:
            self.cgroup.adopt(tree(self.pid, processes()))

    def check(self, table: dict[int, Proc], check_disk: bool) -> None:
        """Kills the tree, noting why, once it is past a limit."""
        if self.reason is None:
            reason = self._over_limit(table, check_disk)
            if reason:
                self.reason = reason
                self.kill()

    def _over_limit(self, table: dict[int, Proc], check_disk: bool) -> str | None:
        pids = tree(self.pid, table)
        if not pids:
            return None
        rss = sum(table[p].rss_bytes for p in pids)
        if rss > self.limits.memory_bytes:
            return f"used {rss / (1 << 30):.1f} GiB of memory (limit {self.limits.memory_bytes / (1 << 30):.1f} GiB)"
        if len(pids) > self.limits.processes:
            return f"started {len(pids)} processes (limit {self.limits.processes})"
        if check_disk:
            used = folder_bytes(self.scratch)
            if used > self.limits.scratch_bytes:
                return f"wrote {used >> 20} MiB to its scratch folder (limit {self.limits.scratch_bytes >> 20} MiB)"
        return None

    def freeze(self) -> None:
        """Stops every process of the tree (its cgroup frozen, else SIGSTOP to each, again until no new one
        appears): nothing of the version runs while something else is timed."""
        if self.cgroup is not None and self.cgroup.freeze(True):
            return
        stopped: set[int] = set()
        for _ in range(20):  # a process forked during a pass is stopped in the next
            pids = set(live_tree(self.pid)) - stopped
            if not pids:
                break
            signal_all(sorted(pids), signal.SIGSTOP)
            stopped |= pids
        wait_stopped(stopped)

    def thaw(self) -> None:
        if self.cgroup is not None and self.cgroup.freeze(False):
            return
        signal_all(live_tree(self.pid), signal.SIGCONT)

    def death_note(self) -> str | None:
        if self.reason:
            return self.reason
        if self.cgroup is not None and self.cgroup.oom_killed():
            return f"ran out of memory (limit {self.limits.memory_bytes / (1 << 30):.1f} GiB)"
        return None

    def kill(self) -> None:
        """Every process of the tree, repeatedly until none is left (a fork loop races a single pass)."""
        if self.cgroup is not None:
            self.cgroup.kill()
        for _ in range(50 if self.root_reaps else 0):
            below = tree(self.pid, processes())[1:]
            if not below:
                break
            kill_all(below)
            time.sleep(0.005)
        for _ in range(20):
            pids = tree(self.pid, processes())
            if not pids:
                break
            kill_all(pids)
            time.sleep(0.005)

    def close(self) -> None:
        self.kill()
        if self.cgroup is not None:
            self.cgroup.remove()


class Watcher:
    """One thread for all of a judge's workers: each tick reads /proc once, checks every worker's limits,
    and ends at once any process that escaped a worker's tree (counted, for the evaluation's flags)."""

    INTERVAL_S = 0.2

    def __init__(self, reap: bool) -> None:
        self.reap = reap
        self.watches: dict[int, Watch] = {}
        self.escaped = 0
        self.kept: set[int] = set()
        # Held by a tick from its read of /proc to its kills, and by whoever starts a worker until its watch
        # is added: a tick in between would take the new worker (a child in a session of its own) for an
        # escaped process.
        self.lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, watch: Watch) -> None:
        with self.lock:
            self.watches[watch.pid] = watch
            watch.lock = self.lock
        if self._thread is None:
            if self.reap:
                become_subreaper()
            self._thread = threading.Thread(target=self._run, name="kerneltui-watch", daemon=True)
            self._thread.start()

    def remove(self, watch: Watch) -> None:
        with self.lock:
            self.watches.pop(watch.pid, None)

    def keep(self, pid: int) -> None:
        """A child of the judge's in a session of its own that is not a worker (a worker template): not escaped."""
        with self.lock:
            self.kept.add(pid)

    def unkeep(self, pid: int) -> None:
        with self.lock:
            self.kept.discard(pid)

    def known(self) -> set[int]:
        return set(self.watches) | self.kept

    def sweep(self) -> int:
        """Ends whatever escaped so far; returns how many escaped since the last sweep."""
        if not self.reap:
            return 0
        with self.lock:
            count = self.escaped + end_escaped(self.known())
            self.escaped = 0
        return count

    def _run(self) -> None:
        ticks = 0
        while not self._stop.wait(self.INTERVAL_S):
            ticks += 1
            with self.lock:
                table = processes()
                watches = list(self.watches.values())
                if self.reap and escaped(self.known(), table):
                    self.escaped += end_escaped(self.known())
            for watch in watches:
                watch.check(table, check_disk=ticks % 5 == 0)

    def stop(self) -> None:
        self._stop.set()


def folder_bytes(root: Path, limit_entries: int = 100_000) -> int:
    """Bytes allocated beneath root, without following links."""
    total, seen = 0, 0
    stack = [str(root)]
    while stack and seen < limit_entries:
        try:
            with os.scandir(stack.pop()) as listing:
                for entry in listing:
                    seen += 1
                    with contextlib.suppress(OSError):
                        info = entry.stat(follow_symlinks=False)
                        total += info.st_blocks * 512
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
        except OSError:
            continue
    return total


def oom_kills(vmstat: Path = Path("/proc/vmstat")) -> int | None:
    """How many processes the kernel's out-of-memory killer has killed on this box since it started (None where
    the kernel does not say): a SIGKILL no one of ours sent, with this count gone up, was for memory."""
    try:
        for line in vmstat.read_text().splitlines():
            name, _, count = line.partition(" ")
            if name == "oom_kill":
                return int(count)
    except (OSError, ValueError):
        return None
    return None


def killed_for_memory(code: int | None, before: int | None) -> bool:
    """Whether a process that ended with `code` (a signal as -N, or bubblewrap's 128+N) was the out-of-memory
    killer's: SIGKILL, and its count rose since `before`."""
    if code not in (-signal.SIGKILL, 128 + signal.SIGKILL) or before is None:
        return False
    now = oom_kills()
    return now is not None and now > before
