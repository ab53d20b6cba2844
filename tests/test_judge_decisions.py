"""The confirmation's thresholds, decided from figures alone: no worker, no process."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.judge.confirm import FRESH_RATIO, OUTSIDE_RATIO, OUTSIDE_SLACK_US, fresh_flag, outside_flag


@pytest.mark.parametrize(
    ("first", "again", "flagged"),
    [
        ({"median_us": 100.0}, {"median_us": 100.0 * FRESH_RATIO * 0.99}, False),  # within the ratio: noise
        ({"median_us": 100.0}, {"median_us": 100.0 * FRESH_RATIO * 1.01}, True),  # a fresh worker far slower
        ({"median_us": 100.0 * FRESH_RATIO * 1.01}, {"median_us": 100.0}, True),  # or far faster
        # event times apart, device times together: a slow host launch path, not another kernel
        ({"median_us": 100.0, "device_median_us": 80.0}, {"median_us": 130.0, "device_median_us": 81.0}, False),
        ({"median_us": 100.0, "device_median_us": 80.0}, {"median_us": 130.0, "device_median_us": 110.0}, True),
    ],
)
def test_a_fresh_worker_far_from_the_first_is_a_timing_mismatch(first: dict, again: dict, flagged: bool) -> None:
    flag = fresh_flag(first, again, "n=16777216")
    assert (flag is not None) is flagged, flag
    if flag is not None:
        assert flag.name == "timing-mismatch" and "n=16777216" in flag.reason


def test_a_median_below_what_the_judge_timed_from_outside_is_flagged() -> None:
    bound = 1000.0
    at_edge = OUTSIDE_RATIO * bound - OUTSIDE_SLACK_US
    assert outside_flag(at_edge, bound, "n=1") is None  # noise and a synchronize's latency are allowed
    flag = outside_flag(at_edge - 1.0, bound, "n=1")
    assert flag is not None and flag.name == "timing-mismatch" and "at least 1000.0 µs" in flag.reason
    assert outside_flag(1.0, None, "n=1") is None  # nothing timed from outside: nothing to hold it to


def test_a_run_made_for_a_check_leaves_no_folder_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every VersionRun made a kerneltui-judge-* folder as it was built: runs made for checks that compile nothing
    (tests, a rung's decision) left them in the temporary folder (16 from one test run)."""
    import tempfile

    from harness.contract.results import Evaluation
    from harness.judge.context import VersionRun
    from harness.problem.load import load_problem
    from tests.conftest import make_workspace

    folder = make_workspace(tmp_path / "ws")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    ev = Evaluation(problem="vadd", version="v001", path=str(folder / "v001.py"), hash="0" * 64)
    run = VersionRun(problem=load_problem(folder), path=folder / "v001.py", ev=ev, dsls=[])
    assert list((tmp_path / "tmp").iterdir()) == []
    private = run.private  # made when a rung first needs it, removed with the evaluation
    assert private.is_dir() and private.parent == tmp_path / "tmp"
    run.discard_private()
    assert list((tmp_path / "tmp").iterdir()) == []
