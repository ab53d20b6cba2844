"""A judge stopped while it judges leaves nothing of its own behind: every worker, template and folder it made is
gone (a judge killed outright left its templates' and evaluations' folders in the temporary folder, one set per
stop: a dashboard stopped a few times a day filled /tmp)."""

from __future__ import annotations

import os
import queue
import sys
import time
from pathlib import Path

import pytest

from harness.contract.options import Options
from harness.workers import leftovers
from kerneltui.core.judging.client import JudgeClient, JudgeMessage, JudgeSaid, LocalProcess
from tests.conftest import FIXTURES, run

pytestmark = pytest.mark.slow


def test_a_judge_stopped_mid_evaluation_removes_what_it_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # the judge's, its templates' and its workers' temporary folders
    problem = tmp_path / "ws" / "vadd"
    problem.mkdir(parents=True)
    (problem / "problem.py").write_text((FIXTURES / "vadd" / "problem.py").read_text())
    (problem / "v001.py").write_text((FIXTURES / "versions" / "hang.py").read_text())
    said: queue.Queue[JudgeMessage] = queue.Queue()
    judge = JudgeClient(0, LocalProcess(sys.executable, Options(), tmp_path / "state"), said.put)
    judge.start()

    def line() -> str:
        message = said.get(timeout=120)
        assert isinstance(message, JudgeSaid), message
        return message.line

    assert '"ready"' in line()
    judge.submit(1, problem / "v001.py", {}, rungs=("load", "correctness"))
    while '"load"' not in line():  # the version loads, then hangs in its first call
        pass
    made = {p.name for p in temp.iterdir() if p.name.startswith("kerneltui-")}
    assert made, "the judge made no temporary folder"
    judge.stop(grace=1.0)
    deadline = time.monotonic() + 30
    left = made
    while left and time.monotonic() < deadline:
        left = {p.name for p in temp.iterdir() if p.name.startswith("kerneltui-")}
        time.sleep(0.1)
    assert not left, left


def test_what_a_killed_judge_left_is_removed_by_the_next_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed outright (its dashboard's terminal closed: SIGKILL), a judge cannot remove its folders; the next judge
    to start removes those whose judge is gone, and leaves alone a folder of a judge still running."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    problem = tmp_path / "ws" / "vadd"
    problem.mkdir(parents=True)
    (problem / "problem.py").write_text((FIXTURES / "vadd" / "problem.py").read_text())
    (problem / "v001.py").write_text((FIXTURES / "versions" / "hang.py").read_text())
    running = temp / "kerneltui-run-still-running"
    running.mkdir()
    (running / ".owner").write_text(f"{os.getpid()} {leftovers.start_time(os.getpid())}\n")  # this test's process
    first = _Started(tmp_path / "state1")
    first.judge.submit(1, problem / "v001.py", {}, rungs=("load", "correctness"))
    while '"load"' not in first.line():
        pass
    made = {p.name for p in temp.iterdir() if p.name.startswith("kerneltui-")} - {running.name}
    assert made, "the judge made no temporary folder"
    transport = first.judge.transport
    assert isinstance(transport, LocalProcess) and transport.proc is not None
    transport.proc.kill()
    transport.proc.wait(timeout=30)
    time.sleep(1.0)  # its workers die with it (their parent-death signal), its folders stay
    assert made <= {p.name for p in temp.iterdir()}
    second = _Started(tmp_path / "state2")
    try:
        left = {p.name for p in temp.iterdir()}
        assert not (made & left), made & left
        assert running.name in left
    finally:
        second.judge.stop(grace=1.0)
        first.judge.stop(grace=0.1)


class _Started:
    """A judge started and ready, and its lines as they come."""

    def __init__(self, state: Path) -> None:
        self.said: queue.Queue[JudgeMessage] = queue.Queue()
        self.judge = JudgeClient(0, LocalProcess(sys.executable, Options(), state), self.said.put)
        self.judge.start()
        assert '"ready"' in self.line()

    def line(self) -> str:
        message = self.said.get(timeout=120)
        assert isinstance(message, JudgeSaid), message
        return message.line


def test_a_judge_python_that_cannot_start_is_said_not_a_traceback(tmp_path: Path) -> None:
    """$KERNELTUI_PYTHON naming no program: `kerneltui eval` ended in Popen's FileNotFoundError traceback."""
    folder = tmp_path / "ws" / "vadd"
    folder.mkdir(parents=True)
    (folder / "problem.py").write_text((FIXTURES / "vadd" / "problem.py").read_text())
    (folder / "v001.py").write_text((FIXTURES / "versions" / "good.py").read_text())
    done = run(
        ["-m", "kerneltui", "eval", str(folder / "v001.py")],
        cwd=tmp_path / "ws",
        env={"KERNELTUI_PYTHON": str(tmp_path / "no-such-python")},
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "the judge's Python could not be started" in done.stdout + done.stderr, done.stdout + done.stderr
