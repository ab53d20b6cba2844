"""Running an imported problem's own code (reference.py, a KernelBench Model) the way the judge runs a version:
in a worker process of its own, never in kerneltui's. It gets a copy of the problem folder to read, a scratch
folder to write, an environment with no secret in it (the harness's worker environment: no API key, no token),
the harness's confinement (harness.containment.sandbox: Landlock, seccomp, no capabilities; inside bubblewrap where
there is
one), no GPU, and bounds on its time and memory, past which it is stopped and the import refused.

Also here: `staged`, which builds a problem folder beside where it goes and renames it into place only whole,
so a refused import leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kerneltui.core.workspace import WorkspaceError

PROBE = Path(__file__).with_name("problem_probe.py")
PROBE_MODULE = "kerneltui_problem_probe"  # its name in the worker's package folder (kerneltui is not readable there)
MAX_ANSWER_BYTES = 1 << 20
MAX_FILE_BYTES = 256 << 20  # what the problem's code may write, and print
THREADS = 4


@dataclass(frozen=True)
class Bounds:
    """How long and how much memory the problem's code may take at import (--check-timeout, --check-memory-mb)."""

    seconds: float = 180.0
    memory_mb: int = 8192

    def text(self) -> str:
        return f"up to {self.seconds:g} s and {self.memory_mb} MiB (--check-timeout, --check-memory-mb)"


def add_arguments(parser: Any) -> None:
    parser.add_argument(
        "--check-timeout",
        type=float,
        default=Bounds.seconds,
        metavar="SECONDS",
        help="how long the problem's own code may run at import, contained (default %(default)g)",
    )
    parser.add_argument(
        "--check-memory-mb",
        type=int,
        default=Bounds.memory_mb,
        metavar="MB",
        help="the address space it may take, in MiB (default %(default)d)",
    )


def bounds_of(args: Any) -> Bounds:
    seconds = getattr(args, "check_timeout", Bounds.seconds)
    memory = getattr(args, "check_memory_mb", Bounds.memory_mb)
    if not seconds > 0 or memory < 512:
        raise WorkspaceError("--check-timeout must be positive and --check-memory-mb at least 512")
    return Bounds(float(seconds), int(memory))


def run_problem_code(folder: Path, task: str, what: str, bounds: Bounds, shown_as: Path | None = None) -> dict:
    """problem_probe's `task` on a copy of `folder`, contained; its answer. `what`: the files whose code runs,
    for the person; `shown_as`: the folder named in messages (where the problem will be). A failure, a stop at
    a bound, or an {"error": ...} answer raises WorkspaceError saying so."""
    from harness.containment import sandbox
    from harness.containment import watch as containment

    level = containment.probe().level
    sandbox.make_undumpable()  # this process's memory and environ, unreadable to the code run below at any level
    print(
        f"{shown_as.name if shown_as else folder.name}: runs {what} (the problem's own code) in a contained process "
        f"({level}; no secrets in its environment, no GPU, {bounds.text()})",
        file=sys.stderr,
        flush=True,
    )
    if level == "none":
        print(
            "warning: nothing here confines it beyond its environment and bounds (`kerneltui doctor` says why)",
            file=sys.stderr,
        )
    with tempfile.TemporaryDirectory(prefix="kerneltui-import-") as tmp:
        root = Path(tmp)
        copy = _lay_out(root, folder)
        answer = _run(root, _argv(root, copy, task), bounds, what)
    error = answer.get("error")
    if error is not None:
        text = str(error).replace(str(copy), str(shown_as or folder))
        raise WorkspaceError(f"{what} failed at import: {text}{_memory_hint(text)}")
    return answer


def _lay_out(root: Path, folder: Path) -> Path:
    """root/{scratch, inbox/<folder's name>, pkg, out}: the layout harness.containment.watch binds for a worker."""
    for name in ("scratch/tmp", "inbox", "pkg", "out"):
        (root / name).mkdir(parents=True)
    copy = root / "inbox" / folder.name
    # links stay links: followed, one left in the folder would copy what it leads to where the code can read it
    shutil.copytree(folder, copy, symlinks=True, ignore=shutil.ignore_patterns("v[0-9]*.py"))
    shutil.copyfile(PROBE, root / "pkg" / f"{PROBE_MODULE}.py")
    return copy


def _argv(root: Path, copy: Path, task: str) -> list[str]:
    from harness.containment import sandbox
    from harness.containment import watch as containment

    inbox, pkg = str(root / "inbox"), str(root / "pkg")
    argv = [sys.executable, "-m", "harness.containment.sandbox", "--scratch", str(root / "scratch")]
    argv += ["--read", inbox, "--read", pkg, "--max-file-bytes", str(MAX_FILE_BYTES), "--", PROBE_MODULE]
    argv += [task, str(copy)]
    offer = containment.probe()
    if offer.bwrap:
        limits = containment.Limits(memory_bytes=1 << 30)  # bubblewrap's /tmp and /dev/shm sizes come from it
        readable = sandbox.read_roots((inbox, pkg))
        argv = [*containment.bwrap_prefix(offer.bwrap, root, readable, limits, share_net=False), *argv]
    return argv


def _env(root: Path) -> dict[str, str]:
    from harness.workers.env import worker_env

    env = worker_env(root, "import", interpret=True, cute_arch="", pkg=root / "pkg")
    env.update(
        CUDA_VISIBLE_DEVICES="",
        TRITON_INTERPRET="1",
        OMP_NUM_THREADS=str(THREADS),
        MKL_NUM_THREADS=str(THREADS),
        MALLOC_ARENA_MAX="2",  # glibc's arenas are address space too
    )
    return env


def _run(root: Path, argv: list[str], bounds: Bounds, what: str) -> dict:
    def limited() -> None:
        memory = bounds.memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        cpu = int(bounds.seconds * THREADS) + 30  # a backstop to the wall-clock bound below
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))

    out, err = root / "answer.json", root / "stderr.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            env=_env(root),
            cwd=root / "scratch",
            start_new_session=True,
            preexec_fn=limited,
        )
        try:
            code = process.wait(timeout=bounds.seconds)
        except subprocess.TimeoutExpired:
            _end(process)
            raise WorkspaceError(
                f"{what} ran past {bounds.seconds:g} s at import and was stopped (--check-timeout raises the bound)"
            ) from None
        except BaseException:  # interrupted: nothing of it outlives the import
            _end(process)
            raise
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # what it left in its group (bubblewrap's namespace is gone)
    return _answer(out, err, code, bounds, what)


def _end(process: subprocess.Popen) -> None:
    """Kills the running process and what it started beneath it (bubblewrap's pid namespace ends with it)."""
    from harness.containment import watch as containment

    with contextlib.suppress(OSError):
        containment.kill_all([process.pid, *containment.tree(process.pid, containment.processes())])
    process.wait()


def _answer(out: Path, err: Path, code: int, bounds: Bounds, what: str) -> dict:
    with out.open("rb") as file:
        text = file.read(MAX_ANSWER_BYTES).decode(errors="replace").strip().splitlines()
    try:
        answer = json.loads(text[-1]) if text else None
    except json.JSONDecodeError:
        answer = None
    if code == 0 and isinstance(answer, dict):
        return answer
    tail = _tail(err)
    if code == -signal.SIGXCPU:
        why = f"ran past its CPU time ({bounds.text()})"
    elif code < 0:
        why = f"was killed by signal {signal.Signals(-code).name}"
    else:
        why = f"ended with exit code {code}"
    raise WorkspaceError(f"{what} {why} at import" + (f": {tail}" if tail else "") + _memory_hint(tail))


def _memory_hint(text: str) -> str:
    said = text.lower()
    if "memory" in said or "bad_alloc" in said or "cannot allocate" in said:
        return " (past the memory bound, perhaps: --check-memory-mb raises it)"
    return ""


def _tail(path: Path) -> str:
    with path.open("rb") as file:
        file.seek(max(0, path.stat().st_size - 4096))
        lines = [line for line in file.read().decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip()[:500] if lines else ""


@contextlib.contextmanager
def staged(target: Path, force: bool) -> Iterator[Path]:
    """A folder to build the problem `target` in, renamed into place when the block ends without an error;
    on an error, removed. It lies two levels below the workspace (.kerneltui-import-*/<name>), where no one takes
    it for a problem. With `force`, the folder there now is its start (what the import writes, written over)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    holder = Path(tempfile.mkdtemp(prefix=".kerneltui-import-", dir=target.parent))
    try:
        stage = holder / target.name
        if force and target.is_dir() and not target.is_symlink():
            shutil.copytree(target, stage, symlinks=True)
        else:
            stage.mkdir()
        yield stage
        if target.exists() or target.is_symlink():
            if not force:
                raise WorkspaceError(f"{target} exists already: pass --force to write over it")
            target.rename(holder / ".replaced")
        stage.rename(target)
    finally:
        shutil.rmtree(holder, ignore_errors=True)
