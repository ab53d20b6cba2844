"""A judge stopped while it judges leaves nothing of its own behind: every worker, template and folder it made is
gone (a judge killed outright left its templates' and evaluations' folders in the temporary folder, one set per
stop: a dashboard stopped a few times a day filled /tmp)."""

from __future__ import annotations

import queue
import sys
import time
from pathlib import Path

import pytest

from harness.contract.options import Options
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
