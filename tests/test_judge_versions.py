"""Versions that break, judged one after another by one judge: each fails with a plain reason, and the next
evaluation still works (a fresh worker each time). Versions that cheat or attack are tests/test_exploits.py's."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, add_version, judge_many, make_workspace, rung

pytestmark = pytest.mark.slow  # every test here judges versions or runs the app end to end

# fixture -> (rung that must fail, words the error must contain; "|" separates alternatives)
EXPECTED_FAILURES = {
    "syntax_error": ("load", "syntax_error.py:5"),
    "missing_import": ("load", "No module named 'tritonn'"),
    "no_entry": ("load", "defines no custom_kernel"),
    "exits_at_import": ("load", "sys.exit(0)"),
    "compile_error": ("compile", "compile_error.py:12"),
    "wrong_shape": ("correctness", "shape (1, 1); the reference's is (1,)"),
    "wrong_dtype": ("correctness", "dtype torch.float64"),
    "pow2_only": ("correctness", "case n=4097"),
    "nan_output": ("correctness", "NaN"),
    "hang": ("correctness", "timed out after 5 s"),
    "segfault": ("correctness", "crashed: SIGSEGV"),
}


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict], Path]:
    folder = make_workspace(tmp_path_factory.mktemp("corpus") / "ws")
    paths = [add_version(folder, name) for name in EXPECTED_FAILURES]
    paths.append(add_version(folder, "good"))
    rungs = ["load", "compile", "correctness", "dumps"]
    results = judge_many(paths, timeout=5, rungs=rungs, max_file_mb=16)
    return results, folder


@pytest.mark.parametrize("fixture", sorted(EXPECTED_FAILURES))
def test_bad_version_fails_with_plain_reason(judged: tuple[dict[str, dict], Path], fixture: str) -> None:
    results, _ = judged
    evaluation = results[fixture]
    failed_rung, words = EXPECTED_FAILURES[fixture]
    assert evaluation["ok"] is False, evaluation
    assert evaluation["status"] == "fail"
    assert evaluation["failed_rung"] == failed_rung, [(r["name"], r["ok"], r["err"]) for r in evaluation["rungs"]]
    err = rung(evaluation, failed_rung)["err"]
    assert any(alternative in err for alternative in words.split("|")), err


def test_rungs_after_a_failure_are_skipped_with_the_reason(judged: tuple[dict[str, dict], Path]) -> None:
    results, _ = judged
    after_load = rung(results["syntax_error"], "compile")
    assert after_load["ok"] is None and after_load["skipped"] == "load failed"
    after_compile = rung(results["compile_error"], "correctness")
    assert after_compile["skipped"] == "compile failed"


def test_a_worker_killed_for_its_version_is_not_taken_for_one_that_escaped(
    judged: tuple[dict[str, dict], Path],
) -> None:
    """A version that hangs is killed with its worker. Killed from the top (bubblewrap first), the processes
    under it were orphans for a moment, and a tick of the watcher flagged escaped-process: a daemon it never
    started."""
    results, _ = judged
    flagged = {name: [f["name"] for f in results[name].get("flags", [])] for name in [*EXPECTED_FAILURES, "good"]}
    assert not [name for name, flags in flagged.items() if "escaped-process" in flags], flagged


def test_the_next_evaluation_still_works(judged: tuple[dict[str, dict], Path]) -> None:
    results, _ = judged
    good = results["good"]
    assert good["ok"] is True and good["status"] == "pass"
    assert rung(good, "correctness")["metrics"]["max_abs"] == 0.0


def test_one_template_serves_interpreted_and_compiling_workers(tmp_path: Path) -> None:
    """The template imports Triton to compile, so Triton's own @jit helpers are compiler-made in every fork: an
    interpreted kernel calling them raised "outside of the scope of a kernel" until they ran interpreted."""
    path = add_version(make_workspace(tmp_path / "ws"), "uses_triton_helpers")
    judged = judge_many([path], rungs=["load", "compile", "correctness"])["uses_triton_helpers"]
    assert judged["status"] == "pass", json.dumps(judged["rungs"])[:2000]
    assert rung(judged, "compile")["ok"] is True
    assert rung(judged, "correctness")["metrics"]["max_abs"] == 0.0


def test_rungs_after_a_skipped_rung_are_skipped_when_the_skip_was_a_failure(
    judged: tuple[dict[str, dict], Path],
) -> None:
    """Load failed, so compile was skipped: correctness is skipped too, not run on a version never loaded."""
    results, _ = judged
    for name in ("syntax_error", "no_entry", "exits_at_import"):
        correctness = rung(results[name], "correctness")
        assert correctness["ok"] is None and correctness["skipped"] == "load failed", correctness


def test_workers_are_contained_as_well_as_this_box_allows(judged: tuple[dict[str, dict], Path]) -> None:
    from harness.containment.watch import probe

    results, _ = judged
    sandbox = results["good"]["sandbox"]
    assert sandbox.startswith(probe().level), sandbox
    assert ("landlock ABI" in sandbox) == (probe().landlock_abi > 0), sandbox


def test_seeds_are_fresh_for_every_evaluation(judged: tuple[dict[str, dict], Path]) -> None:
    results, _ = judged
    good, wrong = results["good"], results["pow2_only"]
    assert len(good["seeds"]) == 2 * 4  # two seeds for each of the four cases
    assert not set(good["seeds"]) & set(wrong["seeds"])


def test_compile_error_names_the_kernel_line(judged: tuple[dict[str, dict], Path]) -> None:
    results, _ = judged
    err = rung(results["compile_error"], "compile")["err"]
    assert err.startswith("compile_error.py:12:") and "scale is not defined" in err


def _worker_processes(judge_pid: int) -> list[int]:
    """The judge's descendants that run harness.containment.sandbox, harness.worker.main or harness.worker.template:
    its workers and the
    templates they are forked from (a fork keeps its template's command line)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    found, frontier = [], {judge_pid}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier}
        for pid in frontier:
            with contextlib.suppress(OSError):
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
                if any(
                    name in command
                    for name in (b"harness.containment.sandbox", b"harness.worker.main", b"harness.worker.template")
                ):
                    found.append(pid)
    return found


@contextlib.contextmanager
def own_judge(*args: str) -> Iterator[subprocess.Popen[str]]:
    """A `python -m harness serve` of the test's own, ended (its input closed, then killed if it lingers) after."""
    judge = subprocess.Popen(
        [sys.executable, "-m", "harness", "serve", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )
    try:
        yield judge
    finally:
        with contextlib.suppress(OSError):
            judge.stdin.close()  # type: ignore[union-attr]
        try:
            judge.wait(timeout=60)
        except subprocess.TimeoutExpired:
            judge.kill()
            judge.wait()


def test_an_idle_judge_ends_its_spare_workers_and_still_judges(workspace: Path) -> None:
    """Spare workers and their templates hold ~300 MB each: a judge with no request for spare_idle_s ends them,
    and the next version is judged all the same, in a worker started for it."""
    path = add_version(workspace, "good", "v001.py")
    with own_judge("--spare-idle-s", "2", "--rungs", "load,compile,correctness") as judge:
        assert judge.stdout is not None and judge.stdin is not None
        assert json.loads(judge.stdout.readline())["event"] == "ready"
        started = time.monotonic() + 60  # forked once the template is up, off the judge's main thread
        while not _worker_processes(judge.pid) and time.monotonic() < started:
            time.sleep(0.1)
        assert _worker_processes(judge.pid), "the judge starts spares ahead of need"
        deadline = time.monotonic() + 120
        while _worker_processes(judge.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _worker_processes(judge.pid), "the idle judge kept its spares"
        judge.stdin.write(json.dumps({"path": str(path), "id": 1}) + "\n")
        judge.stdin.flush()
        events = iter(judge.stdout.readline, "")
        done = next(e for e in map(json.loads, events) if e["event"] in ("done", "error"))
        assert done["event"] == "done" and done["evaluation"]["status"] == "pass", done


def test_a_version_that_comes_while_another_is_past_its_verdict_is_judged_between_its_steps(tmp_path: Path) -> None:
    """One version came, nothing waited at its verdict, so its later rungs ran; the next version, written a moment
    later, waited for all of them (on a GPU its benchmark, here its nvdisasm listings: seconds). The judge now
    stops between steps past a verdict (rungs, bench cases, race rounds, listings) to judge a waiting version to
    its verdict first, and the first version's dumps come after."""
    folder = tmp_path / "kernels" / "softmax"
    folder.mkdir(parents=True)
    (folder / "problem.py").write_text((REPO / "kernels/softmax/problem.py").read_text())
    kernel = (REPO / "kernels/softmax/v002.py").read_text()
    paths = [folder / "v001.py", folder / "v002.py"]
    paths[0].write_text(kernel)
    paths[1].write_text("# the same kernel, written again\n" + kernel)
    order: list[tuple[str, int]] = []
    with own_judge("--rungs", "load,compile,correctness,dumps") as judge:
        assert judge.stdout is not None and judge.stdin is not None
        assert json.loads(judge.stdout.readline())["event"] == "ready"
        judge.stdin.write(json.dumps({"path": str(paths[0]), "id": 1}) + "\n")
        judge.stdin.flush()
        for event in map(json.loads, iter(judge.stdout.readline, "")):
            step = event["rung"]["name"] if event["event"] == "rung" else event["event"]
            order.append((step, event.get("id", 0)))
            if (step, event.get("id")) == ("correctness", 1):
                time.sleep(0.5)  # past the first version's verdict: its dumps are under way
                judge.stdin.write(json.dumps({"path": str(paths[1]), "id": 2}) + "\n")
                judge.stdin.flush()
            if sum(step in ("done", "error") for step, _ in order) == 2:
                break
    assert [s for s, _ in order].count("done") == 2, order
    assert order.index(("correctness", 2)) < order.index(("dumps", 1)) < order.index(("done", 1)), order
    assert order.index(("done", 1)) < order.index(("dumps", 2)), order  # set aside at its verdict, then on


def test_a_version_that_came_while_the_judge_was_busy_is_set_aside_at_its_verdict(workspace: Path) -> None:
    """Two agents writing a version every two seconds: one came while the judge was still at the version before,
    and nothing waited behind it when its verdict came, so its dumps ran, and the next version, written a moment
    later, waited for them. A version that came while the judge was at work is now set aside at its verdict for
    a while (the next is likely on its way): the next one's verdict comes before its dumps."""
    paths = [add_version(workspace, "good", f"v00{i}.py") for i in (1, 2, 3)]
    slow = "import time\n\ntime.sleep(2.0)  # the judge is at work a while: the second version comes meanwhile\n"
    paths[0].write_text(slow + paths[0].read_text())
    order: list[tuple[str, int]] = []
    with own_judge("--rungs", "load,correctness,dumps") as judge:

        def send(rid: int) -> None:
            assert judge.stdin is not None
            judge.stdin.write(json.dumps({"path": str(paths[rid - 1]), "id": rid}) + "\n")
            judge.stdin.flush()

        assert judge.stdout is not None
        assert json.loads(judge.stdout.readline())["event"] == "ready"
        send(1)
        for event in map(json.loads, iter(judge.stdout.readline, "")):
            step = event["rung"]["name"] if event["event"] == "rung" else event["event"]
            order.append((step, event.get("id", 0)))
            if (step, event.get("id")) == ("start", 1):
                time.sleep(1.0)  # the second version comes while the first is judged, a second later
                send(2)
            if (step, event.get("id")) == ("correctness", 2):
                time.sleep(0.3)  # the third comes a moment after the second's verdict, nothing waiting then
                send(3)
            if sum(step in ("done", "error") for step, _ in order) == 3:
                break
    assert [s for s, _ in order].count("done") == 3, order
    assert order.index(("correctness", 3)) < order.index(("dumps", 2)) < order.index(("done", 2)), order
