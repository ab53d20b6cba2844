"""Faster than the best, decided by racing the two back to back: the label, what asks for it, what shows it.
The race itself times on a GPU (tests/test_gpu.py); here the decision and the history around it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.contract.messages import BenchRequest
from harness.contract.options import Options
from harness.contract.report import race_text
from harness.contract.results import Evaluation
from harness.judge.race import decide
from tests.conftest import VERSIONS


def rounds(new: tuple[float, float], best: tuple[float, float]) -> list[dict[str, float | str]]:
    """Rounds in the order they are run: new, best, best, new."""
    return [
        {"who": "new", "median_us": new[0]},
        {"who": "best", "median_us": best[0]},
        {"who": "best", "median_us": best[1]},
        {"who": "new", "median_us": new[1]},
    ]


@pytest.mark.parametrize(
    ("new", "best", "label"),
    [
        ((95.0, 95.2), (100.0, 100.1), "faster"),
        ((110.0, 110.3), (100.0, 100.2), "slower"),
        ((100.3, 99.9), (100.0, 100.2), "same"),
        ((96.0, 104.0), (100.0, 100.0), "ambiguous"),  # the pairs disagree
        ((95.0, 95.0), (100.0, 94.0), "ambiguous"),  # the best's own rounds differ by more than the gap
        ((97.0, 97.0), (100.0, 100.0), "faster"),  # 3% both times, each version steady
        ((101.6, 101.6), (100.0, 100.0), "same"),  # what two processes timing one kernel differ by
    ],
)
def test_the_label_needs_both_pairs_of_rounds_to_agree_beyond_the_noise(
    new: tuple[float, float], best: tuple[float, float], label: str
) -> None:
    decided = decide(rounds(new, best))
    assert decided["label"] == label, decided
    assert decided["ratio"] == pytest.approx(((new[0] / best[0]) * (new[1] / best[1])) ** 0.5)


@pytest.mark.parametrize(("new", "label"), [((103.0, 103.2), "same"), ((92.0, 92.1), "faster")])
def test_a_kernel_whose_time_follows_where_its_inputs_lie_is_raced_within_that_spread(
    new: tuple[float, float], label: str
) -> None:
    """Each worker's inputs lie elsewhere in device memory: 3% apart is no difference for a kernel whose figure
    could move 4% with other places, as both workers' calls on their own placements said."""
    raced = rounds(new, (100.0, 100.1))
    for r in raced:
        r["placement_pct"] = 4.0
    assert decide(raced)["label"] == label
    assert decide(rounds(new, (100.0, 100.1)))["label"] == "slower" if new[0] > 100 else "faster"


def test_a_race_round_is_its_timed_calls_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A race is decided on its rounds' event medians. Each round also took CUPTI's device times, a pass of its own
    that nothing read: 0.08 s a round of a 90 µs softmax on an H100, 0.26 s of vecadd's, three rounds a version."""
    import socket

    import harness.worker.main as worker_mod
    from harness.gpu import timing
    from harness.wire import frames as wire

    class Timer:
        flush_buffer = staticmethod(lambda device: torch.zeros(4))
        rotating = staticmethod(timing.rotating)
        time_calls = staticmethod(lambda call, flush, budget_s: [call() or 0.09 for _ in range(10)])

    passes: list[str] = []

    def device_times(*args: object) -> dict[str, object]:
        passes.append("device times")
        return {}

    monkeypatch.setattr(worker_mod, "device_times", device_times)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        worker = worker_mod.Worker(ours, "run", "sm_90")
        worker.entry = lambda x: x + 1
        tensors: list[torch.Tensor] = []
        request = BenchRequest(0.5, race=True, inputs=wire.encode_tree([torch.ones(3)], tensors))
        worker.do_bench(request.header(), tensors, timer=Timer)
        header, _ = wire.recv(theirs, timeout=5)
    assert header["ok"], header
    assert len(header["samples_ms"]) == 10 and passes == [] and "device times" not in header["phases_s"], header


def test_the_race_is_read_as_people_and_agents_read_it() -> None:
    text = race_text({"against": "v002", **decide(rounds((95.0, 95.0), (100.0, 100.0)))})
    assert text == "faster than v002 raced back to back (0.95× its time)"
    assert "not raced against v002: the best's file changed" in race_text(
        {"against": "v002", "label": None, "note": "the best's file changed since it was judged"}
    )


def test_a_request_names_the_best_to_race_by_device() -> None:
    target = {"path": "/w/vadd/v002.py", "hash": "ab" * 32, "version": "v002"}
    options = Options().updated({"race_with": {"NVIDIA H200": target}})
    assert options.race_for("NVIDIA H200") == target and options.race_for("NVIDIA A100") is None
    with pytest.raises(ValueError, match="race_with"):
        Options().updated({"race_with": {"NVIDIA H200": {"path": 3}}})
    assert "--race-with" in Options().updated({"race_with": {"NVIDIA H200": target}}).to_argv()


def with_race(ev: Evaluation, label: str, ratio: float) -> Evaluation:
    bench = ev.rung("benchmark")
    assert bench is not None
    bench.metrics["race"] = {"against": "v002", "label": label, "ratio": ratio, "tolerance_pct": 1.0}
    return ev


def test_the_history_keeps_the_label_and_the_raced_ratio_not_a_ratio_of_old_medians(tmp_path: Path) -> None:
    """A median below the best's, taken at another time, made a version 'faster than the best' (vs_best > 1)
    even when racing the two side by side could not tell them apart."""
    from kerneltui.core.judging import runner
    from kerneltui.history.store import Store
    from kerneltui.ui.widgets.versions import best_median, row_cells
    from tests import dashboard_fixtures

    workspace = dashboard_fixtures.build(tmp_path / "ws")
    store = Store(workspace.db_path, create=False)
    request = store.best_request("vadd")
    target = request["race_with"]["NVIDIA H200"]
    assert request["best_us"] == {"NVIDIA H200": 52.0} and target["version"] == "v002"
    assert Path(target["path"]) == workspace.root / "vadd" / "v002.py" and len(target["hash"]) == 64

    path = workspace.root / "vadd" / "v009.py"
    path.write_text((VERSIONS / "good.py").read_text() + "\n# v009\n")
    version_id, digest, problem = runner.record_version(store, workspace, path)
    evaluation_id = store.start_evaluation(version_id, problem, "v009", digest)
    rungs = dashboard_fixtures.rungs_for("pass", 50.0, tmp_path)
    ev = Evaluation(problem=problem, version="v009", path=str(path), hash=digest, rungs=rungs,
                    device={"kind": "cuda", "name": "NVIDIA H200", "arch": "sm_90"})  # fmt: skip
    ev.finish()
    store.finish_evaluation(evaluation_id, with_race(ev, "ambiguous", 0.99))
    row = store.evaluation(evaluation_id)
    assert row is not None and row["race"] == "ambiguous" and row["vs_best"] == pytest.approx(1 / 0.99)
    rows = store.version_rows("vadd")
    cells = row_cells(next(r for r in rows if r["name"] == "v009"), best_median(rows))
    assert cells[7].plain == "★ best"  # its median is the lowest now; the race is shown on the others
    v002 = next(r for r in rows if r["name"] == "v002")
    assert row_cells(v002, best_median(rows))[7].plain == "0.96×"  # never raced: the medians' ratio
    v002["race"], v002["vs_best"] = "slower", 0.5
    assert row_cells(v002, best_median(rows))[7].plain == "▼0.50×"
    store.close()


def test_an_ambiguous_race_is_not_announced_as_a_new_best(tmp_path: Path) -> None:
    from kerneltui.core.judging.scheduler import beat_best_of

    finished = beat_best_of
    assert finished({"race": "ambiguous", "vs_best": 1.01}) is False
    assert finished({"race": "faster", "vs_best": 1.04}) is True
    assert finished({"race": None, "vs_best": 1.04}) is True  # no race (the first on a GPU): the medians


def test_only_a_version_that_won_its_race_is_judged_again_as_a_would_be_best() -> None:
    """A median a hair below the best's, by noise, sent every same-speed version through the fresh worker and
    Nsight Compute; the race decides now, and the medians only where there was no race."""
    from harness.judge.rungs.benchmark import would_be_best
    from tests.judge_context import context_without_workers

    h200 = {"name": "NVIDIA H200"}
    judge = context_without_workers(Options().updated({"best_us": 100.0}), h200)
    assert would_be_best(judge, {"label": "same", "ratio": 0.995}, 99.5) is False
    assert would_be_best(judge, {"label": "faster", "ratio": 0.9}, 90.0) is True
    assert would_be_best(judge, {"label": None, "note": "the best's file changed"}, 99.0) is True
    assert would_be_best(judge, None, 101.0) is False
    assert would_be_best(context_without_workers(Options(), h200), None, 500.0) is True  # the first on this GPU


def test_a_judge_on_a_gpu_keeps_two_run_workers_started_ahead() -> None:
    """The race takes a second run worker per evaluation: with one spare, the next version's load waited 3.4 s
    (median, H200) for a worker to start."""
    from harness.workers.process import WorkerPool

    pool = WorkerPool(keep_spare=True)
    try:
        pool.cuda = True
        started: list[object] = []
        pool._spawn = lambda mode: started.append(object()) or started[-1]  # type: ignore[method-assign]
        pool.prestart()
        assert len(started) == 2
        version, rival = pool.take("run"), pool.take("run")
        assert [version, rival] == started[:2]  # both started before the evaluation asked
        assert len(pool.spares["run"]) == 2 and pool.spares["run"] == started[2:]
    finally:
        pool.spares.clear()
        pool.close()


def test_the_reference_is_timed_once_per_problem_and_case_for_ten_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every evaluation timed the reference again: a second of each verdict spent on a figure that does not
    change while problem.py does not."""
    import contextlib
    import time
    from types import SimpleNamespace

    from harness.gpu import timing
    from harness.judge.bench_calls import REFERENCE_TTL_S, reference_timing

    timed: list[int] = []
    monkeypatch.setattr(timing, "time_calls", lambda call, flush, budget_s: timed.append(1) or [2.0] * 10)
    monkeypatch.setattr(timing, "flush_buffer", lambda device: None)
    quiet = SimpleNamespace(quiet=lambda timed: contextlib.nullcontext())
    ladder = SimpleNamespace(reference_times={}, flush=None, device="cpu", options=Options(), pool=quiet, clocks=None)
    problem = SimpleNamespace(hash="a", reference=lambda *inputs: None)
    first = reference_timing(ladder, problem, "n=1", ())  # type: ignore[arg-type]
    assert reference_timing(ladder, problem, "n=1", ()) is first and len(timed) == 1  # type: ignore[arg-type]
    reference_timing(ladder, problem, "n=2", ())  # type: ignore[arg-type]
    reference_timing(ladder, SimpleNamespace(hash="b", reference=problem.reference), "n=1", ())  # type: ignore[arg-type]
    assert len(timed) == 3 and first.median_us == 2000.0
    ladder.reference_times[("a", "n=1")] = (time.monotonic() - REFERENCE_TTL_S - 1, first)
    reference_timing(ladder, problem, "n=1", ())  # type: ignore[arg-type]
    assert len(timed) == 4
