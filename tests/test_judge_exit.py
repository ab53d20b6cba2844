"""A judge stopped while it judges leaves nothing of its own behind: every worker, template and folder it made is
gone (a judge killed outright left its templates' and evaluations' folders in the temporary folder, one set per
stop: a dashboard stopped a few times a day filled /tmp)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.contract.options import Options
from kerneltui.core.judge import JudgeProcess
from tests.conftest import FIXTURES

pytestmark = pytest.mark.slow


def test_a_judge_stopped_mid_evaluation_removes_what_it_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # the judge's, its templates' and its workers' temporary folders
    problem = tmp_path / "ws" / "vadd"
    problem.mkdir(parents=True)
    (problem / "problem.py").write_text((FIXTURES / "vadd" / "problem.py").read_text())
    (problem / "v001.py").write_text((FIXTURES / "versions" / "hang.py").read_text())
    judge = JudgeProcess(sys.executable, Options(), tmp_path / "state", subprocess.DEVNULL)
    proc = judge.start()
    assert proc.stdout is not None
    assert '"ready"' in proc.stdout.readline()
    judge.submit(1, problem / "v001.py", {}, rungs=("load", "correctness"))
    for line in proc.stdout:  # the version loads, then hangs in its first call
        if '"load"' in line:
            break
    made = {p.name for p in temp.iterdir() if p.name.startswith("kerneltui-")}
    assert made, "the judge made no temporary folder"
    judge.stop(grace=1.0)
    deadline = time.monotonic() + 30
    left = made
    while left and time.monotonic() < deadline:
        left = {p.name for p in temp.iterdir() if p.name.startswith("kerneltui-")}
        time.sleep(0.1)
    assert not left, left
