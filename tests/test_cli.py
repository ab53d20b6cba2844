"""`kerneltui eval` and `history` as a user runs them: exit codes, JSON, and a real history file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import VERDICT_RUNGS, add_version, judge_many, kerneltui, run


@pytest.mark.slow
def test_eval_pass_records_and_exits_zero(workspace: Path, own_judges: None) -> None:
    """End to end as a person runs it: `kerneltui eval` starts a judge of its own (`--once`). Its stderr is
    drained while its events are read: 200 KB printed by problem.py (it runs in the judge) filled the pipe and
    deadlocked `kerneltui eval`."""
    problem = workspace / "problem.py"
    problem.write_text('import sys\nsys.stderr.write("noise " * 40_000 + "\\n")\n' + problem.read_text())
    version = add_version(workspace, "good", "v001.py")
    done = kerneltui("eval", str(version), "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert list(result)[:5] == ["problem", "version", "ok", "device", "rungs"]
    assert result["problem"] == "vadd" and result["version"] == "v001" and result["ok"] is True
    assert result["median_us_is"].startswith("the event time (median_us): CUDA events")  # the deciding figure named
    names = [r["name"] for r in result["rungs"]]
    assert names == ["load", "compile", "correctness", "benchmark", "roofline", "dumps"]
    for r in result["rungs"]:
        assert set(r) >= {"name", "ok", "err", "metrics", "seconds"}
    dumps = next(r for r in result["rungs"] if r["name"] == "dumps")
    state = workspace.parent / ".kerneltui"
    assert Path(dumps["metrics"]["dir"]).is_relative_to(state / "dumps" / "vadd" / "v001")
    assert {"ttir", "ttgir", "llir", "ptx", "cubin", "sass"} <= set(dumps["metrics"]["kinds"])
    for item in dumps["metrics"]["files"]:
        assert Path(item["path"]).stat().st_size == item["bytes"] > 0
    sass = next(Path(f["path"]) for f in dumps["metrics"]["files"] if f["kind"] == "sass")
    assert "v001.py" in sass.read_text()  # SASS interleaved with source lines
    assert (state / "history.db").is_file()


@pytest.mark.slow
def test_eval_fail_exits_one_and_human_output(workspace: Path) -> None:
    version = add_version(workspace, "pow2_only", "v002.py")
    done = kerneltui("eval", str(version), "--rungs", "load,compile,correctness")
    assert done.returncode == 1
    assert "✗ correctness" in done.stdout and "case n=4097" in done.stdout
    assert "vadd v002: fail" in done.stdout and "recorded as evaluation 1 in" in done.stdout


@pytest.mark.slow
def test_bad_problem_exits_two_naming_it(workspace: Path) -> None:
    version = add_version(workspace, "good", "v001.py")
    (workspace / "problem.py").write_text("def reference(a, b):\n    return a + b\n")
    done = kerneltui("eval", str(version))
    assert done.returncode == 2
    assert "vadd: problem.py is missing make_inputs" in done.stderr


def test_bad_usage_exits_two(workspace: Path) -> None:
    assert kerneltui("eval", str(workspace / "v999.py")).returncode == 2
    assert kerneltui("eval", str(workspace / "problem.py")).returncode == 2
    assert kerneltui("eval", str(workspace / "x.py"), "--rungs", "load,bogus").returncode == 2


@pytest.mark.slow
def test_history_newest_first_and_rewrites_kept(workspace: Path) -> None:
    version = add_version(workspace, "good", "v001.py")
    rungs = ("--rungs", ",".join(VERDICT_RUNGS))
    assert kerneltui("eval", str(version), *rungs).returncode == 0
    version.write_text(version.read_text().replace("BLOCK 1024.", "BLOCK 1024, rewritten."))
    assert kerneltui("eval", str(version), *rungs).returncode == 0
    wrong = add_version(workspace, "nan_output", "v002.py")
    assert kerneltui("eval", str(wrong), *rungs).returncode == 1

    done = kerneltui("history", "--json", cwd=workspace.parent)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [(r["version"], r["ok"]) for r in rows] == [("v002", False), ("v001", True), ("v001", True)]
    assert rows[1]["hash"] != rows[2]["hash"] and rows[1]["notes"].endswith("rewritten.")
    assert rows[0]["failed_rung"] == "correctness" and rows[0]["verdict"] is None
    for key in (
        "problem",
        "version",
        "hash",
        "ok",
        "failed_rung",
        "metrics",
        "verdict",
        "verdict_reason",
        "time",
    ):
        assert key in rows[0]
    assert rows[1]["metrics"]["max_abs"] == 0.0

    only = json.loads(kerneltui("history", "vadd", "--json", "--workspace", str(workspace.parent)).stdout)
    assert len(only) == 3
    table = kerneltui("history", cwd=workspace.parent).stdout
    assert "v002" in table and "correctness" in table


def test_history_workspace_default_is_kernels_folder(tmp_path: Path) -> None:
    done = kerneltui("history", cwd=tmp_path)
    assert done.returncode == 2 and "--workspace" in done.stderr


@pytest.mark.slow
def test_corrupt_history_is_moved_aside(workspace: Path) -> None:
    state = workspace.parent / ".kerneltui"
    state.mkdir()
    (state / "history.db").write_bytes(b"this is not a database" * 100)
    version = add_version(workspace, "good", "v001.py")
    done = kerneltui("eval", str(version), "--rungs", "load")
    assert done.returncode == 0
    assert "could not be read" in done.stderr
    kept = list(state.glob("history.db.corrupt-*"))
    assert kept and kept[0].read_bytes().startswith(b"this is not a database")
    with sqlite3.connect(state / "history.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == 1
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.slow
def test_harness_alone_imports_no_app_packages(workspace: Path) -> None:
    version = add_version(workspace, "good", "v001.py")
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['harness', {str(version)!r}, '--json', '--rungs', 'load,compile,correctness']\n"
        "try:\n    runpy.run_module('harness', run_name='__main__')\nexcept SystemExit as e:\n    code = e.code\n"
        "banned = {'textual', 'anthropic', 'sqlite_utils', 'watchdog', 'kerneltui', 'agents'}\n"
        "print('LOADED', sorted({m.split('.')[0] for m in sys.modules} & banned), code)\n"
    )
    done = run(["-c", probe])
    assert "LOADED [] 0" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_dumps_rung_fails_when_it_cannot_write(workspace: Path, tmp_path: Path) -> None:
    version = add_version(workspace, "good", "v001.py")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the state folder should be")
    judged = judge_many([version], rungs=["load", "compile", "dumps"], state_dir=str(blocker))["v001"]
    assert judged["ok"] is False
    dumps = next(r for r in judged["rungs"] if r["name"] == "dumps")
    assert dumps["ok"] is False and "cannot write dumps" in dumps["err"]


@pytest.mark.slow
def test_problem_code_that_raises_is_named(workspace: Path) -> None:
    version = add_version(workspace, "good", "v001.py")
    problem = workspace / "problem.py"
    problem.write_text(problem.read_text().replace("    return a + b\n", "    raise ValueError('reference broke')\n"))
    done = kerneltui("eval", str(version), "--json", "--rungs", "load,compile,correctness")
    # A broken problem, not a failing version: exit 2, and the history says so.
    assert done.returncode == 2, done.stdout + done.stderr
    assert "vadd/problem.py:" in done.stderr and "reference broke" in done.stderr
    latest = json.loads(kerneltui("history", "--json", "--workspace", str(workspace.parent)).stdout)[0]
    assert latest["status"] == "error" and "reference broke" in latest["error"]


@pytest.mark.slow
def test_reference_returning_no_tensor_is_a_problem_error(workspace: Path) -> None:
    version = add_version(workspace, "good", "v001.py")
    problem = workspace / "problem.py"
    problem.write_text(problem.read_text().replace("    return a + b\n", "    return float((a + b).sum())\n"))
    done = kerneltui("eval", str(version), "--rungs", "load,correctness")
    assert done.returncode == 2 and "reference returned a float; it must return torch tensors" in done.stderr


@pytest.mark.slow
def test_make_inputs_unable_to_build_shape_only_inputs_still_compiles(workspace: Path) -> None:
    # Shape-only (meta) inputs are the judge's shortcut for the bench case: make_inputs need not support them.
    problem = workspace / "problem.py"
    problem.write_text(
        problem.read_text().replace(
            '    n = case["n"]\n', "    n = case[\"n\"]\n    assert str(device) != 'meta', 'no meta here'\n"
        )
    )
    version = add_version(workspace, "good", "v001.py")
    done = kerneltui("eval", str(version), "--json", "--rungs", "load,compile,correctness")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_a_subset_of_rungs_skips_what_a_failed_load_leaves_nothing_for(workspace: Path) -> None:
    broken = add_version(workspace, "syntax_error", "v001.py")
    done = kerneltui("eval", str(broken), "--json", "--rungs", "load,correctness")
    rungs = {r["name"]: r for r in json.loads(done.stdout)["rungs"]}
    assert done.returncode == 1 and rungs["correctness"]["skipped"] == "load failed"
    good = add_version(workspace, "good", "v002.py")
    done = kerneltui("eval", str(good), "--json", "--rungs", "load,roofline")
    rungs = {r["name"]: r for r in json.loads(done.stdout)["rungs"]}
    assert done.returncode == 0 and rungs["roofline"]["skipped"] == "needs benchmark"


@pytest.mark.slow
def test_eval_takes_the_config_files_ladder_options_and_flags_win(workspace: Path, tmp_path: Path) -> None:
    """`kerneltui eval` ignored the config file's [ladder] settings."""
    version = add_version(workspace, "good", "v001.py")
    config = tmp_path / "config.toml"
    config.write_text('[ladder]\nrungs = ["load", "compile"]\nseeds = 1\n')
    done = kerneltui("eval", str(version), "--json", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert [r["name"] for r in json.loads(done.stdout)["rungs"]] == ["load", "compile"]
    done = kerneltui("eval", str(version), "--json", "--config", str(config), "--rungs", "load")
    assert [r["name"] for r in json.loads(done.stdout)["rungs"]] == ["load"]
    config.write_text("[ladder]\ntimeout = -1\n")
    done = kerneltui("eval", str(version), "--config", str(config))
    assert done.returncode == 2 and "[ladder]: timeout: must be above 0" in done.stderr, done.stderr


@pytest.mark.slow
def test_init_writes_a_problem_and_a_first_version_that_passes(tmp_path: Path) -> None:
    from tests.conftest import kerneltui

    done = kerneltui("init", "axpy", "--workspace", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout and (tmp_path / "axpy" / "problem.py").is_file()
    assert '"""axpy: say here what it computes' in (tmp_path / "axpy" / "problem.py").read_text()
    again = kerneltui("init", "axpy", "--workspace", str(tmp_path))
    assert again.returncode != 0 and "exists already" in again.stderr
    bad = kerneltui("init", "../x", "--workspace", str(tmp_path))
    assert bad.returncode != 0 and "is not a problem name" in bad.stderr
    judged = kerneltui("eval", str(tmp_path / "axpy" / "v001.py"), "--rungs", "load,compile,correctness", "--json")
    assert judged.returncode == 0, judged.stdout[-2000:] + judged.stderr[-2000:]
    assert json.loads(judged.stdout)["status"] in ("pass", "unverified"), judged.stdout[-2000:]
