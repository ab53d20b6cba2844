"""Namespaces of a forked worker's own (harness.worker.template), made without privileges by the fork itself (it is
single-threaded, as unshare(CLONE_NEWUSER) requires): user, mount and ipc namespaces, and a pid namespace
where this box lets the worker have a /proc of its own.

In them the worker sees only its own folder of the template's workers (the others are covered by an empty
folder) and its inbox read-only; with a pid namespace, no process of the template or of another worker, and
every process it starts ends with it. Where bubblewrap's /proc (partly covered) forbids a fresh one, the
pid namespace is bubblewrap's, shared with the template: Landlock keeps /proc to the worker's own entry and
signals inside its own domain. Each step a box refuses is skipped and said.
"""

from __future__ import annotations

import contextlib
import ctypes
import os

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWIPC = 0x20000, 0x10000000, 0x20000000, 0x08000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 0x4000, 1 << 18
)  # fmt: skip
_ST_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def unshare_all() -> str | None:
    """New user, mount and ipc namespaces, this user mapped onto itself, mounts private; a pid namespace for
    the next child where a fresh /proc can be mounted. None, or why not (then nothing changed)."""
    uid, gid = os.getuid(), os.getgid()
    libc = _libc()
    try:
        _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC), "unshare")
    except OSError as exc:
        return f"no namespaces of its own ({exc.strerror})"
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        # Mapping root onto itself needs CAP_SETFCAP above (Linux 5.12+), which bubblewrap dropped: unmapped,
        # the worker shows as nobody inside and keeps its own ids for every file it touches.
        with contextlib.suppress(OSError):
            _write(f"/proc/self/{name}", text)
    try:
        _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "private mounts")
    except OSError as exc:  # the namespaces exist; only their set-up failed: the process must not go on
        raise RuntimeError(f"setting up the worker's namespaces failed: {exc}") from exc
    return None


def unshare_pid() -> bool:
    """A pid namespace for the next child (call after unshare_all); whether there is one."""
    return _libc().unshare(CLONE_NEWPID) == 0


def pid_namespace_works() -> bool:
    """Whether a worker's first process could mount a /proc of its own in a pid namespace of its own, tried in a
    throwaway fork (the kernel refuses a fresh /proc where the one above is partly covered, as bubblewrap's
    is; without one, the worker's /proc would show another namespace's processes by its own pids)."""
    child = os.fork()
    if child == 0:
        code = 1
        try:
            if unshare_all() is None and unshare_pid():
                first = os.fork()
                if first == 0:
                    os._exit(0 if own_proc() else 1)
                code = os.waitstatus_to_exitcode(os.waitpid(first, 0)[1])
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w") as handle:
            handle.write(text)
    except OSError as exc:
        raise OSError(exc.errno, f"{path}: {exc.strerror}") from None


def only_own_folder(slots: str, own: str, cover: str, read_only: tuple[str, ...]) -> str | None:
    """Covers `slots` (every worker's folder) with `cover` (an empty folder holding only an empty one named as
    `own`) and binds `own` back where it was, with the paths in `read_only` beneath it read-only; None, or why
    not. The judge makes the cover: a user namespace that could not map its user may create no file itself."""
    libc = _libc()
    try:
        keep = os.open(own, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return f"its folder is gone ({exc.strerror})"
    try:
        _check(libc.mount(cover.encode(), slots.encode(), None, MS_BIND, None), "cover the workers' folders")
        _check(libc.mount(f"/proc/self/fd/{keep}".encode(), own.encode(), None, MS_BIND | MS_REC, None), "bind")
        for path in read_only:
            read_only_bind(libc, path)
    except OSError as exc:
        return f"other workers' folders not hidden ({exc})"
    finally:
        os.close(keep)
    return None


def read_only_bind(libc: ctypes.CDLL, path: str) -> None:
    """`path` bound onto itself and made read-only, keeping the flags a user namespace may not drop."""
    _check(libc.mount(path.encode(), path.encode(), None, MS_BIND, None), f"bind {path}")
    kept = os.statvfs(path).f_flag
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | sum(ms for st, ms in _ST_FLAGS if kept & st)
    _check(libc.mount(None, path.encode(), None, flags, None), f"read-only {path}")


def own_proc() -> bool:
    """A /proc of this pid namespace (its first process calls it): other processes' entries gone. Where the
    /proc above is partly covered (bubblewrap's), the kernel refuses; Landlock still limits /proc to its own."""
    with contextlib.suppress(OSError):
        _check(_libc().mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "proc")
        return True
    return False


# The order to join another process's namespaces in: its user namespace first (it grants the rights to join the
# rest), the mount namespace last (it changes what /proc shows this process).
JOIN_ORDER = ("user", "cgroup", "ipc", "uts", "net", "pid", "mnt")


def join(pid: int) -> list[str]:
    """Enters every namespace of process `pid` that is not already this process's, in JOIN_ORDER: the names
    joined. In a pid namespace only this process's children are born in it. A process with threads cannot
    join a user namespace (call it in a fresh fork). Raises OSError where the kernel refuses one."""
    opened: list[tuple[str, int]] = []
    try:
        for name in JOIN_ORDER:
            target = f"/proc/{pid}/ns/{name}"
            try:
                theirs, mine = os.stat(target), os.stat(f"/proc/self/ns/{name}")
            except FileNotFoundError:
                continue  # a kernel without this kind of namespace
            if (theirs.st_dev, theirs.st_ino) != (mine.st_dev, mine.st_ino):
                opened.append((name, os.open(target, os.O_RDONLY | os.O_CLOEXEC)))
        libc = _libc()
        for name, fd in opened:
            _check(libc.setns(fd, 0), f"joining the {name} namespace")
    finally:
        for _, fd in opened:
            os.close(fd)
    return [name for name, _ in opened]
