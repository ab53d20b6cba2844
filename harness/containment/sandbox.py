"""Confining a kernel's worker from its first instruction: Landlock, seccomp, no capabilities, rlimits.

`python -m harness.containment.sandbox --scratch S --read PATH... -- MODULE ARGS...` confines its own process,
then runs MODULE (harness.worker.main) in it, so torch, the CUDA driver and every thread they start are
confined too (Landlock and seccomp bind the calling thread and what it starts later, not threads that
already exist). Inside bubblewrap this is a second wall; where bubblewrap is missing it is the wall:
- Landlock (Linux 5.13+, no privileges): reads only of the Python environment, system libraries, the
  version's inbox and this process's own /proc entry; writes only beneath the scratch folder and to
  /dev/null-like nodes and the GPU's device nodes (ioctls on those alone); no TCP; no signals to, or
  ptrace of, processes outside the sandbox (so no /proc/<judge>/environ).
- seccomp: no new sockets of any family (the judge's socket is inherited), no TIOCSTI or TIOCLINUX
  (keystrokes into a terminal), no ptrace, keyrings, mounts, namespaces, modules, clocks or io_uring.
- no capabilities, even as root; no core files; no file past --max-file-mb.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import importlib.util
import os
import platform
import resource
import runpy
import shutil
import site
import sys
import sysconfig

# What confine_self() did, for the worker's ready message (it runs in this same process).
APPLIED: list[str] = []

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF, _SYS_SECCOMP = 444, 445, 446, {"x86_64": 317, "aarch64": 277}
_PR_SET_NO_NEW_PRIVS, _PR_SET_DUMPABLE, _PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT = 38, 4, 1, 24, 47
_RULE_PATH_BENEATH = 1
_CREATE_RULESET_VERSION = 1

# Landlock filesystem rights, by ABI
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_AND_MAKE = sum(1 << bit for bit in range(4, 13))  # remove dir/file; make char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1

PLAIN_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
GPU_DEVICE_GLOBS = ("/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dxg")
PROC_READABLE = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/filesystems", "/proc/sys", "/proc/driver")
SYSTEM_READABLE = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/sys", "/opt/nvidia")
ETC_READABLE = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/os-release",
)
# Packages whose folders the worker must read wherever they are installed (a --target folder, a user site).
# nvidia_cutlass_dsl holds CuTeDSL's runtime library (cu12/lib) two folders above the `cutlass` package;
# TileLang loads libz3 from the `z3` package and TVM's runtime from `tvm_ffi`.
NEEDED_PACKAGES = (
    "torch",
    "triton",
    "numpy",
    "cutlass",
    "nvidia_cutlass_dsl",
    "tvm_ffi",
    "nvidia",
    "cuda",
    "tilelang",
    "z3",
    "harness",
)
FILE_LIMIT_HINT = "a file past the size limit, --max-file-mb; printed output counts"


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


def _linux() -> bool:
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "aarch64")


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 where there is none."""
    if not _linux():
        return 0
    version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(int(version), 0)


def die_with_parent(signum: int = 9) -> None:
    """Asks the kernel to signal this process (SIGKILL by default) when its parent dies, so no orphan keeps
    a GPU busy."""
    if platform.system() == "Linux":
        _libc().prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)


def make_undumpable() -> None:
    """Keeps other processes of this user (a kernel's worker) from reading this one's memory."""
    if platform.system() == "Linux":
        _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def limit_file_size(max_bytes: int) -> None:
    """No file this process (or a child) writes may grow past max_bytes: a version printing without end, or
    filling a scratch file, is stopped by SIGXFSZ before it fills the disk. Nor does a crash leave a core
    file. Soft and hard limits both: the version cannot raise them again; a later call may only lower them."""
    current = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    if current != resource.RLIM_INFINITY:
        max_bytes = min(max_bytes, current)
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


# --- what the worker may read -------------------------------------------------------------------


def read_roots(extra: tuple[str, ...] = ()) -> list[str]:
    """Folders and files the kernel's worker may read: this Python and its packages, system libraries,
    the CUDA toolkit and driver, a few files of /etc. Never the person's home, the workspace, /tmp."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    roots |= {p for p in (sysconfig.get_paths().get("include"), sysconfig.get_paths().get("platinclude")) if p}
    roots |= set(site.getsitepackages())
    user_site = site.getusersitepackages()
    if isinstance(user_site, str) and os.path.isdir(user_site):
        roots.add(user_site)
    for name in NEEDED_PACKAGES:
        roots |= _package_folders(name)
    for var in (
        "LD_LIBRARY_PATH",
        "CUDA_HOME",
        "CUDA_PATH",
        "TRITON_LIBCUDA_PATH",
        "TRITON_PTXAS_PATH",
        "CUTE_DSL_LIBS",
    ):
        roots |= {p for p in os.environ.get(var, "").split(os.pathsep) if os.path.isabs(p)}
    roots |= compiler_prefixes()
    roots |= set(SYSTEM_READABLE) | set(ETC_READABLE) | set(extra)
    real = {os.path.realpath(p) for p in roots if p and os.path.exists(p)}
    return sorted(real | {p for p in roots if p and os.path.exists(p)})


def compiler_prefixes() -> set[str]:
    """Where the C compiler Triton builds its launcher with is installed (/usr, or e.g. /opt/gcc)."""
    found = set()
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        path = shutil.which(name) if name else None
        if path:
            real = os.path.realpath(path)
            found.add(os.path.dirname(os.path.dirname(real)))  # /opt/gcc/bin/gcc -> /opt/gcc
    return {p for p in found if p not in ("/", "")}


def _package_folders(name: str) -> set[str]:
    """The folder a top-level package lives in (its site-packages or --target folder) and the package itself."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return set()
    if spec is None:
        return set()
    found = set()
    for location in spec.submodule_search_locations or ([spec.origin] if spec.origin else []):
        package = os.path.realpath(location)
        found.add(package)
        if name != "harness":  # harness lives in kerneltui's checkout, beside the workspace: itself only
            found.add(os.path.dirname(package))
    return found


def gpu_devices() -> list[str]:
    return sorted({path for pattern in GPU_DEVICE_GLOBS for path in glob.glob(pattern)})


# --- Landlock -----------------------------------------------------------------------------------


def _fs_rights(abi: int) -> int:
    rights = _EXECUTE | _WRITE_FILE | _READ_FILE | _READ_DIR | _REMOVE_AND_MAKE
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def landlock_rules(scratch: str, readable: list[str], abi: int) -> list[tuple[str, int]]:
    """(path, rights) the worker is granted; anything else in the file system is denied."""
    everything = _fs_rights(abi)
    rules = [(path, _READ) for path in readable]
    rules.append((scratch, everything & ~_IOCTL_DEV))
    rules.append(("/dev", _READ_DIR))
    rules += [(dev, _READ_FILE | _WRITE_FILE) for dev in PLAIN_DEVICES]
    rules += [(dev, _READ_FILE | _WRITE_FILE | _READ_DIR | _IOCTL_DEV) for dev in gpu_devices()]
    rules.append((own_proc_entry(), _READ))
    rules += [(path, _READ) for path in PROC_READABLE]
    return [(path, rights & everything) for path, rights in rules]


def own_proc_entry() -> str:
    """This process's folder in the /proc it sees: by the pid of that /proc's namespace, which is not getpid()'s
    in a forked worker's own pid namespace beneath bubblewrap's /proc."""
    try:
        return f"/proc/{os.readlink('/proc/self')}"
    except OSError:
        return f"/proc/{os.getpid()}"


def landlock(scratch: str, readable: list[str]) -> str:
    """Confines this thread and whatever it starts later; says what it did, or 'none: why'."""
    abi = landlock_abi()
    if abi < 1:
        return "none: Landlock is not available on this kernel"
    libc = _libc()
    attr = _RulesetAttr(handled_access_fs=_fs_rights(abi))
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
        for path, rights in landlock_rules(scratch, readable, abi):
            _allow_beneath(libc, ruleset, path, rights)
        _no_new_privs(libc)
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            return f"none: landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    extras = (", no TCP" if abi >= 4 else "") + (", no signals out" if abi >= 6 else "")
    return f"landlock ABI {abi}: reads its Python, system libraries and the version, writes its scratch{extras}"


def _allow_beneath(libc: ctypes.CDLL, ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone, or not ours to see: nothing to allow
    try:
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            access &= _FILE_RIGHTS
        rule = _PathBeneathAttr(allowed_access=access, parent_fd=fd)
        if access and libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def no_new_privs() -> None:
    """No exec of this process or a child gains privileges (setuid, file capabilities): as bubblewrap sets."""
    _no_new_privs(_libc())


def _no_new_privs(libc: ctypes.CDLL) -> None:
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS)")


# --- seccomp ------------------------------------------------------------------------------------

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_DENIED_SYSCALLS = {
    # ptrace, process_vm_readv/writev, keyctl, add_key, request_key, mount, umount2, pivot_root, chroot,
    # unshare, setns, init/finit/delete_module, kexec_load, kexec_file_load, reboot, swapon, swapoff, bpf,
    # acct, settimeofday, clock_settime, clock_adjtime, adjtimex, sethostname, setdomainname, userfaultfd,
    # open_by_handle_at, name_to_handle_at, quotactl, syslog, vhangup, io_uring_*, new mount API
    "x86_64": (101, 310, 311, 250, 248, 249, 165, 166, 155, 161, 272, 308, 175, 313, 176, 246, 320, 169, 167,
               168, 321, 163, 164, 227, 305, 159, 170, 171, 323, 304, 303, 179, 103, 153, 172, 173,
               425, 426, 427, 428, 429, 430, 431, 432, 433, 442),
    "aarch64": (117, 270, 271, 219, 217, 218, 40, 39, 41, 51, 97, 268, 105, 273, 106, 104, 294, 142, 224,
                225, 280, 89, 170, 112, 266, 171, 161, 162, 282, 265, 264, 60, 116, 58,
                425, 426, 427, 428, 429, 430, 431, 432, 433, 442),
}  # fmt: skip
_SOCKET = {"x86_64": 41, "aarch64": 198}
_IOCTL = {"x86_64": 16, "aarch64": 29}
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C
_RET_ALLOW, _RET_ERRNO, _RET_KILL = 0x7FFF0000, 0x00050000, 0x80000000
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_EPERM, _EACCES = 1, 13


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_program(machine: str) -> list[tuple[int, int, int, int]]:
    """The BPF filter, as (code, jt, jf, k): other architectures are killed, the listed calls refused."""
    denied = _DENIED_SYSCALLS[machine]
    prog = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ_K, 1, 0, _AUDIT_ARCH[machine]),
        (_RET_K, 0, 0, _RET_KILL),
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        (_JGE_K, 0, 1, 0x40000000),  # x32 system calls
        (_RET_K, 0, 0, _RET_ERRNO | _EPERM),
        (_JEQ_K, 0, 1, _SOCKET[machine]),
        (_RET_K, 0, 0, _RET_ERRNO | _EACCES),
        (_JEQ_K, 0, 5, _IOCTL[machine]),  # not ioctl: on to the denied list, past the 5 ioctl instructions
        (_LD_W_ABS, 0, 0, 24),  # low word of args[1]: the request
        (_JEQ_K, 1, 0, _TIOCSTI),
        (_JEQ_K, 0, 1, _TIOCLINUX),
        (_RET_K, 0, 0, _RET_ERRNO | _EPERM),
        (_RET_K, 0, 0, _RET_ALLOW),  # any other ioctl
    ]
    for number in denied:
        prog += [(_JEQ_K, 0, 1, number), (_RET_K, 0, 0, _RET_ERRNO | _EPERM)]
    prog.append((_RET_K, 0, 0, _RET_ALLOW))
    return prog


def seccomp() -> str:
    """Installs the filter on every thread of this process (TSYNC); says what it did, or 'none: why'."""
    machine = platform.machine()
    if not _linux() or machine not in _SOCKET:
        return "none: seccomp filters are written for Linux x86_64 and aarch64"
    prog = seccomp_program(machine)
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    libc = _libc()
    _no_new_privs(libc)
    set_mode_filter, tsync = 1, 1
    if libc.syscall(_SYS_SECCOMP[machine], set_mode_filter, tsync, ctypes.byref(fprog)) != 0:
        return f"none: seccomp failed ({os.strerror(ctypes.get_errno())})"
    return "seccomp: no new sockets, no TIOCSTI, no ptrace, keyrings, mounts, namespaces, modules or clocks"


# --- capabilities -------------------------------------------------------------------------------


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> str:
    """No capability is left, even to root: no CAP_SYS_ADMIN (TIOCSTI into any terminal), no CAP_DAC_*."""
    libc = _libc()
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last = int(handle.read())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # fails harmlessly where this process lacks CAP_SETPCAP
    libc.prctl(_PR_CAP_AMBIENT, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        return f"none: capset failed ({os.strerror(ctypes.get_errno())})"
    return "no capabilities"


def init_cuda() -> int:
    """cuInit before confinement: the driver may start helpers (nvidia-modprobe) that a confined process
    cannot; what it sets up stays for this process. Returns CUresult (0 when there is no libcuda)."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    return int(libcuda.cuInit(0))


def cuda_device_count() -> int:
    """GPUs the CUDA driver sees, asked through libcuda (no torch import, a few milliseconds)."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int(0)
    if libcuda.cuInit(0) != 0 or libcuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


# --- everything, in order -----------------------------------------------------------------------


def confine_self(
    scratch: str, extra_readable: tuple[str, ...], max_file_bytes: int, skip: frozenset[str] = frozenset()
) -> list[str]:
    """Everything above, in the order that works (Landlock and seccomp need no_new_privs, not capabilities).
    `skip` leaves parts out, by name (landlock, seccomp, capabilities): for finding which one a box dislikes."""
    if max_file_bytes:
        limit_file_size(max_file_bytes)
    applied = [
        "none: landlock skipped" if "landlock" in skip else landlock(scratch, read_roots(extra_readable)),
        "none: seccomp skipped" if "seccomp" in skip else seccomp(),
        "capabilities kept (skipped)" if "capabilities" in skip else drop_capabilities(),
    ]
    applied.append(f"files up to {max_file_bytes >> 20} MiB, no core files" if max_file_bytes else "no core files")
    return applied


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.containment.sandbox", description=__doc__)
    parser.add_argument("--scratch", required=True, help="the only folder the process may write")
    parser.add_argument("--read", action="append", default=[], help="another path it may read (repeatable)")
    parser.add_argument("--max-file-bytes", type=int, default=0)
    parser.add_argument("--off", action="store_true", help="run unconfined (--no-sandbox), saying so")
    parser.add_argument("--cuda-first", action="store_true", help="initialise the CUDA driver before confining")
    parser.add_argument("--skip", default="", help="parts to leave out, comma-separated: landlock,seccomp,capabilities")
    parser.add_argument("module")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    die_with_parent()
    if args.cuda_first:
        init_cuda()
    from harness.containment import sandbox as module  # run as __main__: the worker imports this file again by its name

    if args.off:
        module.APPLIED.append("none: disabled (--no-sandbox)")
        if args.max_file_bytes:
            limit_file_size(args.max_file_bytes)
    else:
        skip = frozenset(s.strip() for s in args.skip.split(",") if s.strip())
        module.APPLIED.extend(confine_self(args.scratch, tuple(args.read), args.max_file_bytes, skip))
    sys.argv = [args.module, *args.args]
    runpy.run_module(args.module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
