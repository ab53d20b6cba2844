"""Running the ladder from kerneltui: the judge is a subprocess (`python -m harness --stream`) in
the GPU box's Python, and its JSON lines become history rows as they arrive.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from harness import protocol, source
from harness.results import Evaluation, RungResult
from harness.workers import judge_env
from kerneltui.core.workspace import Workspace
from kerneltui.history.store import Store

STDERR_TAIL = 3000
MAX_VERSION_BYTES = int(source.MAX_VERSION_KB * 1024)


@dataclass
class LadderOptions:
    timeout: float = 60.0
    rungs: list[str] | None = None
    arch: str = "sm_90"
    seeds: int = 2
    sandbox: bool = True
    best_us: dict[str, float] = field(default_factory=dict)  # by device: only a faster version is confirmed

    def argv(self) -> list[str]:
        args = ["--timeout", f"{self.timeout:g}", "--arch", self.arch, "--seeds", str(self.seeds)]
        if self.best_us:
            args += ["--best-us", json.dumps(self.best_us)]
        if self.rungs:
            args += ["--rungs", ",".join(self.rungs)]
        if not self.sandbox:
            args.append("--no-sandbox")
        return args


@dataclass
class Outcome:
    evaluation_id: int
    evaluation: Evaluation | None = None
    problem_error: str | None = None
    error: str | None = None
    rungs: list[RungResult] = field(default_factory=list)


def harness_python() -> str:
    """The Python that runs the ladder: $KERNELTUI_PYTHON (the GPU box's torch), else this one."""
    return os.environ.get("KERNELTUI_PYTHON") or sys.executable


def harness_env(python: str, state: Path) -> dict[str, str]:
    """Environment for the judge: no secret (API keys live only in the agent's process), only what the
    ladder and CUDA read; another Python gets a path holding only our harness package."""
    env = dict(judge_env(), PYTHONUNBUFFERED="1", KERNELTUI_WATCH_PARENT="1")
    if Path(python).resolve() != Path(sys.executable).resolve():
        link_dir = state / "runtime"
        link_dir.mkdir(parents=True, exist_ok=True)
        link = link_dir / "harness"
        target = Path(__file__).resolve().parent.parent / "harness"
        if link.is_symlink() and link.resolve() != target:
            link.unlink()
        if not link.exists():
            link.symlink_to(target, target_is_directory=True)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(link_dir), os.environ.get("PYTHONPATH")) if p)
    return env


def record_version(store: Store, workspace: Workspace, path: Path, author: str = "") -> tuple[int, str, str]:
    """Problem and version rows for a file, from its bytes now; returns (version_id, hash, problem).
    A file past the size limit raises VersionTooLarge: nothing of it is read whole or stored."""
    import hashlib

    stat = path.stat()
    data = source.read_version(path, MAX_VERSION_BYTES)
    digest = hashlib.sha256(data).hexdigest()
    problem_dir = path.parent
    problem_file = problem_dir / "problem.py"
    problem_text = problem_file.read_text(errors="replace") if problem_file.is_file() else ""
    store.ensure_problem(
        problem_dir.name,
        str(problem_dir),
        source.notes(problem_text),
        hashlib.sha256(problem_text.encode()).hexdigest(),
    )
    text = data.decode(errors="replace")
    version_id = store.ensure_version(
        problem_dir.name, path.stem, path, digest, source.notes(text), author, len(data), source=text
    )
    if stat.st_size == len(data):  # unchanged while read: the stamp describes these bytes
        store.set_file_stamp(version_id, stat.st_size, stat.st_mtime_ns)
    return version_id, digest, problem_dir.name


def record_refusal(store: Store, path: Path, reason: str) -> int:
    """A version refused unread (too large): a row saying so, with its size and hash but not its text."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    problem = path.parent.name
    store.ensure_problem(problem, str(path.parent), "")
    version_id = store.ensure_version(problem, path.stem, path, digest.hexdigest(), "", "", path.stat().st_size)
    evaluation_id = store.start_evaluation(version_id, problem, path.stem, digest.hexdigest())
    ev = Evaluation(problem=problem, version=path.stem, path=str(path), hash=digest.hexdigest())
    ev.rungs.append(RungResult(name="load", ok=False, err=reason))
    ev.finish()
    store.finish_evaluation(evaluation_id, ev)
    return evaluation_id


def evaluate(
    store: Store,
    workspace: Workspace,
    path: Path,
    options: LadderOptions,
    on_rung: Callable[[RungResult], None] | None = None,
    evaluation_id: int | None = None,
) -> Outcome:
    """Runs the ladder on one file in a judge subprocess and records everything as it streams in."""
    path = path.resolve()
    if evaluation_id is None:
        version_id, digest, problem = record_version(store, workspace, path)
        options.best_us = store.best_medians(problem)
        evaluation_id = store.start_evaluation(version_id, problem, path.stem, digest, vars(options))
    python = harness_python()
    argv = [
        python,
        "-m",
        "harness",
        str(path),
        "--stream",
        "--state-dir",
        str(workspace.state),
        *options.argv(),
    ]
    outcome = Outcome(evaluation_id)
    # stderr to a file, not a pipe: a pipe nobody drains while stdout is read blocks a chatty judge for good
    errors = tempfile.TemporaryFile()  # noqa: SIM115  (closed below)
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
        env=harness_env(python, workspace.state),
        start_new_session=True,
        cwd=workspace.state,  # `-m` puts the cwd first on sys.path: kerneltui's folder, not an agent's
    )
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            _handle_event(store, outcome, line, on_rung)
    except BaseException:
        proc.kill()
        errors.close()
        store.fail_evaluation(evaluation_id, "interrupted", status="error")
        raise
    proc.wait()
    stderr = _tail(errors, STDERR_TAIL)
    if outcome.evaluation is None and outcome.problem_error is None:
        outcome.error = f"the judge exited (code {proc.returncode}) without a result: {stderr[-STDERR_TAIL:].strip()}"
        store.fail_evaluation(evaluation_id, outcome.error)
    return outcome


def _tail(file: IO[bytes], chars: int) -> str:
    with file:
        size = file.seek(0, os.SEEK_END)
        file.seek(max(0, size - 4 * chars))
        return file.read().decode(errors="replace")[-chars:]


def _handle_event(store: Store, outcome: Outcome, line: str, on_rung: Callable[[RungResult], None] | None) -> None:
    event = protocol.parse(line)  # anything but the judge's events is noise on its stdout
    if isinstance(event, protocol.RungFinished):
        store.add_rung(outcome.evaluation_id, len(outcome.rungs), event.rung)
        outcome.rungs.append(event.rung)
        if on_rung:
            on_rung(event.rung)
    elif isinstance(event, protocol.Finished):
        outcome.evaluation = event.evaluation
        store.finish_evaluation(outcome.evaluation_id, outcome.evaluation)
    elif isinstance(event, protocol.Failed):
        outcome.problem_error = event.error
        store.fail_evaluation(outcome.evaluation_id, outcome.problem_error, status="error")
