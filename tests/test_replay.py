"""The recorded CuTeDSL session on rmsnorm: found where recordings are listed, left out of the demo where CuTeDSL is
not installed, and played through the replay agent and the real ladder: its first version fails to compile with
the compiler's own diagnosis, the fix compiles, and with no GPU neither can be run."""

from __future__ import annotations

import importlib.util
import shutil
import sqlite3
from pathlib import Path

import pytest

from agents.replay import builtin_recordings, load_recording
from kerneltui import demo
from tests.conftest import REPO, kerneltui


def test_the_cutedsl_session_ships_for_rmsnorm_and_ends_on_the_example_version() -> None:
    recording = load_recording(builtin_recordings()["rmsnorm"])
    assert recording.problem == "rmsnorm" and len(recording.steps) == 3
    assert all("import cutlass.cute as cute" in step.code and step.say for step in recording.steps)
    assert recording.problem_file.read_text() == (REPO / "kernels" / "rmsnorm" / "problem.py").read_text()
    assert recording.steps[-1].code == (REPO / "kernels" / "rmsnorm" / "v003.py").read_text()


def test_the_demo_leaves_out_a_session_whose_dsl_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def no_cutlass(name: str, *args: object) -> object:
        return None if name == "cutlass" else real(name, *args)  # type: ignore[arg-type]

    recording = load_recording(builtin_recordings()["rmsnorm"])
    monkeypatch.setattr(importlib.util, "find_spec", no_cutlass)
    assert recording.missing_dsls() == ["cutedsl"]
    assert set(demo.demo_recordings()) == set(builtin_recordings()) - {"rmsnorm"}
    assert load_recording(builtin_recordings()["softmax"]).missing_dsls() == []


@pytest.mark.slow
def test_the_cutedsl_session_replays_through_the_ladder(tmp_path: Path) -> None:
    pytest.importorskip("cutlass.cute")
    workspace = tmp_path / "kernels"
    (workspace / "rmsnorm").mkdir(parents=True)
    shutil.copy(builtin_recordings()["rmsnorm"] / "problem.py", workspace / "rmsnorm" / "problem.py")
    done = kerneltui("agent", "rmsnorm", "--backend", "replay", "--pace", "0", "--workspace", str(workspace))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stopped: the recording is finished" in done.stdout
    with sqlite3.connect(workspace / ".kerneltui" / "history.db") as conn:
        evaluations = conn.execute("SELECT id, version, status, failed_rung FROM evaluations ORDER BY id").fetchall()
        rungs = {
            (version, name): (ok, skipped, err)
            for version, name, ok, skipped, err in conn.execute(
                "SELECT e.version, r.name, r.ok, r.skipped, r.err FROM rungs r "
                "JOIN evaluations e ON e.id = r.evaluation_id"
            )
        }
        said = [text for (text,) in conn.execute("SELECT text FROM agent_events WHERE kind = 'text' ORDER BY id")]
    assert [row[1:] for row in evaluations] == [
        ("v001", "fail", "compile"),
        ("v002", "unverified", None),
        ("v003", "unverified", None),
    ]
    ok, _, err = rungs[("v001", "compile")]
    first = err.splitlines()[0]
    assert ok == 0 and first.startswith("v001.py:32: DSLUserCodeError: error[ARG_NON_CONSTANT]: `range_constexpr()`")
    assert "for k in cutlass.range_constexpr(PER_THREAD):" in err and "\\x1b" not in err and "\x1b" not in err
    assert rungs[("v001", "correctness")][1] == "compile failed"
    for version in ("v002", "v003"):
        assert rungs[(version, "compile")][0] == 1 and rungs[(version, "dumps")][0] == 1
        assert "no GPU" in rungs[(version, "correctness")][1]
    assert said[0].startswith("RMSNorm moves 4 bytes per element") and "range_constexpr" in said[1]
    assert (workspace / "rmsnorm" / "v003.py").read_text() == (REPO / "kernels" / "rmsnorm" / "v003.py").read_text()
