"""Running NVIDIA's tools (nvdisasm, cuobjdump, ptxas) on files a kernel's worker wrote, confined.

A version can plant any bytes where the judge collects compiled kernels, and these tools parse them: a tool's
bug is then the version's way out. So a tool runs as a worker does: inside bubblewrap where it is installed (new
user, pid, ipc, net and uts namespaces, a read-only view of system libraries, the tool and its inputs alone),
and under Landlock, seccomp and no capabilities everywhere, with limits on its address space, wall time and the
output it may write, in an environment that holds none of the judge's variables.

`python -S -m harness.containment.confined --scratch DIR --read PATH... -- TOOL ARGS` is the trampoline: it confines
its own
process, then becomes the tool (Landlock and seccomp stay across exec).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import PACKAGE_DIR
from harness.containment import sandbox

# What a dynamically linked tool needs to start: the loader, libc and the loader's cache.
SYSTEM_READS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d")
HARNESS_ROOT = PACKAGE_DIR.parent  # the folder that holds the harness package
MIB = 1 << 20


@dataclass(frozen=True)
class ToolRun:
    """What a confined tool said: its exit code, its output (capped), and why it did not finish, if it did not."""

    code: int
    output: str
    failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None and self.code == 0


@dataclass(frozen=True)
class ToolLimits:
    timeout_s: float = 60.0
    memory_bytes: int = 2 << 30
    output_bytes: int = 32 << 20


def run_confined(
    argv: list[str], reads: Sequence[Path | str], limits: ToolLimits = ToolLimits(), use_bwrap: bool | None = None
) -> ToolRun:
    """Runs argv[0] on `reads` (the only files it may read besides system libraries), confined and limited.
    `use_bwrap`: None where bubblewrap is installed (the containment's probe), False for Landlock alone."""
    tool = os.path.realpath(argv[0])
    name = Path(argv[0]).name
    with tempfile.TemporaryDirectory(prefix="kerneltui-tool-") as work:
        scratch = Path(work) / "scratch"
        scratch.mkdir()
        allowed = [tool, *(os.path.realpath(p) for p in reads)]
        bwrap = _bwrap_path() if use_bwrap is not False else None
        command = [
            os.path.realpath(sys.executable),
            "-S",
            "-m",
            "harness.containment.confined",
            "--scratch",
            str(scratch),
        ]
        command += [f"--memory={limits.memory_bytes}", f"--output={limits.output_bytes}"]
        command += [arg for path in allowed for arg in ("--read", path)]
        command += [*(["--walled"] if bwrap else []), "--", tool, *argv[1:]]
        if bwrap:
            command = [*_bwrap_argv(bwrap, allowed, scratch), *command]
        env = {"PATH": "/usr/bin:/bin", "LANG": "C", "HOME": str(scratch), "TMPDIR": str(scratch)}
        out_path = Path(work) / "output"
        with open(out_path, "wb") as out:
            try:
                proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=HARNESS_ROOT,
                    # a group of its own to kill, in the judge's session: a child in a session of its own is what
                    # the judge's watch takes for a process escaped from a worker
                    process_group=0,
                )
            except OSError as exc:
                return ToolRun(1, "", f"{name} could not start: {exc.strerror or exc}")
            code = _wait(proc, limits.timeout_s)
        output = _read_capped(out_path, limits.output_bytes)
        full = out_path.stat().st_size >= limits.output_bytes  # a tool that ignores SIGXFSZ fails its write instead
    return ToolRun(-1 if code is None else code, output, _failure(name, code, limits, full))


def _bwrap_path() -> str | None:
    from harness.containment.watch import probe

    return probe().bwrap


def _bwrap_argv(bwrap: str, allowed: list[str], scratch: Path) -> list[str]:
    """bubblewrap's argv up to the trampoline: a root holding system libraries, this Python (without its site
    packages: the trampoline runs with -S), the harness package, the tool and its inputs, read-only."""
    from harness.containment.watch import bind_arguments

    python = os.path.realpath(sys.executable)
    readable = [*SYSTEM_READS, sys.base_prefix, os.path.dirname(python), str(HARNESS_ROOT / "harness"), *allowed]
    argv = [bwrap, "--unshare-all", "--as-pid-1", "--die-with-parent", "--new-session"]
    if os.geteuid() == 0:
        argv += ["--cap-drop", "ALL"]
    argv += ["--tmpfs", "/tmp", "--dev", "/dev", "--proc", "/proc"]
    argv += bind_arguments([p for p in readable if os.path.exists(p)])
    return [*argv, "--bind", str(scratch), str(scratch), "--chdir", str(HARNESS_ROOT), "--"]


def _wait(proc: subprocess.Popen[bytes], timeout_s: float) -> int | None:
    """Its exit code; None when it ran past timeout_s (then it and all it started are killed)."""
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def _read_capped(path: Path, limit: int) -> str:
    with open(path, "rb") as handle:
        return handle.read(limit).decode(errors="replace")


def _failure(name: str, code: int | None, limits: ToolLimits, output_full: bool) -> str | None:
    """Why the tool did not finish on its own terms, in the person's words; None when it did."""
    if code is None:
        return f"{name} ran past {limits.timeout_s:g} s: stopped"
    died = -code if code < 0 else code - 128 if code > 128 else 0  # bubblewrap passes a signal on as 128 + it
    if died == signal.SIGXFSZ or (output_full and code != 0):
        return f"{name} wrote more than {limits.output_bytes // MIB} MiB of output: stopped"
    if died in (signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS):
        return f"{name} died of signal {died} (its limit: {limits.memory_bytes // MIB} MiB of memory)"
    return None


# --- the trampoline, inside ----------------------------------------------------------------------


def confine_and_exec(
    scratch: str, reads: list[str], memory_bytes: int, output_bytes: int, argv: list[str], walled: bool
) -> None:
    """Limits and confines this process, then becomes argv[0]. `walled`: inside bubblewrap already."""
    sandbox.die_with_parent()
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    sandbox.limit_file_size(output_bytes)  # its output file too: a tool printing without end is stopped
    readable = [p for p in (*SYSTEM_READS, *reads) if os.path.exists(p)]
    applied = [sandbox.landlock(scratch, readable), sandbox.seccomp(), sandbox.drop_capabilities()]
    if applied[0].startswith("none") and not walled:  # nothing else would keep it from the judge's files
        sys.stderr.write(f"the tool was not run: it cannot be confined here ({applied[0]})\n")
        sys.exit(126)
    os.execv(argv[0], argv)


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -S -m harness.containment.confined", description=__doc__)
    parser.add_argument("--scratch", required=True, help="the only folder the tool may write")
    parser.add_argument("--read", action="append", default=[], help="a file or folder it may read (repeatable)")
    parser.add_argument("--memory", type=int, required=True, help="its address space, in bytes")
    parser.add_argument("--output", type=int, required=True, help="the largest file it may write, in bytes")
    parser.add_argument("--walled", action="store_true", help="it runs inside bubblewrap")
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    parsed = parser.parse_args(args)
    argv = parsed.argv[1:] if parsed.argv[:1] == ["--"] else parsed.argv
    if not argv:
        parser.error("no tool given")
    confine_and_exec(parsed.scratch, parsed.read, parsed.memory, parsed.output, argv, parsed.walled)


if __name__ == "__main__":
    main()
