"""Shared fixtures: a real workspace on disk, and the CLIs run as real subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
VERSIONS = FIXTURES / "versions"  # honest versions, and ones that break (hang, crash, do not compile)
EXPLOITS = Path(__file__).parent / "exploits"  # versions that cheat the judge or attack its box
REPO = Path(__file__).parent.parent
HAS_CUDA = os.path.exists("/dev/nvidiactl")


def make_workspace(root: Path, problem: str = "vadd") -> Path:
    """A workspace holding one fixture problem; returns the problem folder."""
    folder = root / problem
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / problem / "problem.py", folder / "problem.py")
    return folder


def add_version(folder: Path, fixture: str, name: str | None = None) -> Path:
    target = folder / (name or f"{fixture}.py")
    source = VERSIONS / f"{fixture}.py"
    shutil.copy(source if source.exists() else EXPLOITS / f"{fixture}.py", target)
    return target


@pytest.fixture(autouse=True)
def context_indexes_without_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new context index in this process holds no installed package (triton's and CuTeDSL's sources are
    seconds to index and would outrank the small contexts tests search): tests that want them say so."""
    from agents import context_index

    monkeypatch.setattr(context_index, "NEW_INDEX_PACKAGES", ())


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """tmp/ws/vadd/problem.py; the fixture returns the problem folder."""
    return make_workspace(tmp_path / "ws")


def run(
    args: list[str], cwd: Path | None = None, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


def kerneltui(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return run(["-m", "kerneltui", *args], cwd=cwd, timeout=timeout)


def judge_many(
    paths: list[Path],
    serve_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    wait_s: float = 1800,
    **request: object,
) -> dict[str, dict]:
    """Runs `python -m harness serve` once over many versions; returns their evaluations by path and stem
    (a refused version: {"error": ...}). A judge still running after `wait_s` seconds fails the test."""
    lines = "".join(json.dumps({"path": str(p), "id": str(p), **request}) + "\n" for p in paths)
    done = subprocess.run(
        [sys.executable, "-m", "harness", "serve", *serve_args],
        input=lines,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=wait_s,
        env=dict(os.environ, **(env or {})),
    )
    results: dict[str, dict] = {}
    for line in done.stdout.splitlines():
        event = json.loads(line)
        if event["event"] == "done":
            results[event["id"]] = event["evaluation"]
        elif event["event"] == "error":
            results[str(event.get("id"))] = {"error": event["error"]}
    assert len(results) == len(paths), done.stderr[-3000:]
    results.update({Path(key).stem: value for key, value in list(results.items())})
    return results


def rung(evaluation: dict, name: str) -> dict:
    return next(r for r in evaluation["rungs"] if r["name"] == name)
