"""Confining a kernel's worker with Landlock (Linux 5.13+, no privileges needed), via ctypes.

Once confined, the worker may write only beneath its scratch folder (and /dev, /proc, which CUDA
needs), may not open TCP connections, signal or ptrace processes outside its domain: so a version
can neither rewrite problem.py or the history database, nor read the judge's memory. Reads stay
open (a kernel needs its libraries). Where Landlock is missing, the worker runs unconfined and the
evaluation says so.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_PR_SET_NO_NEW_PRIVS, _PR_SET_DUMPABLE, _PR_SET_PDEATHSIG = 38, 4, 1
_RULE_PATH_BENEATH = 1
_CREATE_RULESET_VERSION = 1

_WRITE_FILE = 1 << 1
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE_ANY = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 where there is none."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(int(version), 0)


def die_with_parent() -> None:
    """Asks the kernel to kill this process when its parent dies, so no orphan keeps a GPU busy."""
    if platform.system() == "Linux":
        _libc().prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)


def make_undumpable() -> None:
    """Keeps other processes of this user (a kernel's worker) from reading this one's memory."""
    if platform.system() == "Linux":
        _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


FILE_LIMIT_HINT = "a file past the size limit, --max-file-mb; printed output counts"


def limit_file_size(max_bytes: int) -> None:
    """No file this process (or a child) writes may grow past max_bytes: a version printing without end, or
    filling a scratch file, is stopped by SIGXFSZ before it fills the disk. Nor does a crash leave a core
    file. Soft and hard limits both: the version cannot raise them again."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def confine(writable: list[str]) -> str:
    """Confines this process (and its children) to writing beneath `writable`; says what it did."""
    abi = landlock_abi()
    if abi < 1:
        return "none: Landlock is not available on this kernel"
    libc = _libc()
    write_access = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_ANY
    if abi >= 2:
        write_access |= _REFER
    if abi >= 3:
        write_access |= _TRUNCATE
    attr = _RulesetAttr(handled_access_fs=write_access)
    size = 8
    if abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL
        size = 24
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        return f"none: landlock_create_ruleset failed ({os.strerror(ctypes.get_errno())})"
    try:
        for path in writable:
            _allow_beneath(libc, ruleset, path, write_access)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"none: prctl(NO_NEW_PRIVS) failed ({os.strerror(ctypes.get_errno())})"
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            return f"none: landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    extras = (", no TCP" if abi >= 4 else "") + (", no signals out" if abi >= 6 else "")
    return f"landlock ABI {abi}: writes only to its scratch folder{extras}; no ptrace of other processes"


def _allow_beneath(libc: ctypes.CDLL, ruleset: int, path: str, access: int) -> None:
    if not os.path.exists(path):
        return
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = _PathBeneathAttr(allowed_access=access, parent_fd=fd)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path})")
    finally:
        os.close(fd)
