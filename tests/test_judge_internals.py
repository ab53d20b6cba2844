"""Tests that reach into a judge: one harness.judge.ladder.Ladder in this process, with its pool of real workers, whose
methods they patch to watch or to break what it does. One file, so that one judge serves them all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.contract.messages import Failure, LoadReply
from harness.contract.options import Options
from harness.judge.ladder import Ladder
from harness.judge.rungs.builtin import LADDER
from harness.workers.process import WorkerProcess
from tests.conftest import add_version, make_workspace

pytestmark = pytest.mark.slow  # every test here judges versions


@pytest.fixture(scope="module")
def ladder() -> Iterator[Ladder]:
    """The judge; each test sets the options it judges with (monkeypatch.setattr(ladder, "options", ...))."""
    judge = Ladder(Options(), LADDER)
    yield judge
    judge.close()


def test_a_version_that_does_not_load_again_after_hanging_ahead_fails_with_its_import_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ladder: Ladder
) -> None:
    """The worker that hung compiling ahead is replaced and the version loaded again; should that load fail (an
    import that differs between workers), the compile rung says so with the import's error. Its fresh worker's
    reply went unread: the real calls then met a version that was never imported, blamed on it."""
    folder = make_workspace(tmp_path / "ws")
    path = add_version(folder, "hangs_when_compiled_ahead", "v001.py")
    monkeypatch.setattr(ladder, "options", Options(state_dir=tmp_path / "state", timeout=5, rungs=("load", "compile")))
    loaded: list[str] = []
    real_load = ladder.context.load_source

    def second_load_of_a_mode_fails(worker: WorkerProcess, *args: Any, **kwargs: Any) -> LoadReply | Failure:
        loaded.append(worker.mode)
        if loaded.count(worker.mode) > 1:
            return Failure("ImportError: imports only once")
        return real_load(worker, *args, **kwargs)

    monkeypatch.setattr(ladder.context, "load_source", second_load_of_a_mode_fails)
    compiled = ladder.evaluate(path).rung("compile")
    assert compiled is not None and compiled.ok is False, compiled
    assert compiled.err == "it did not load again in a fresh worker: ImportError: imports only once", compiled
    assert "timed out" in compiled.metrics["precompile"]["why"], compiled.metrics


def test_the_best_is_started_and_loaded_once_for_every_race_against_it(
    workspace: Path, ladder: Ladder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each race took a fresh worker for the best and loaded it: on an H200 the race waited 1.8 s a verdict for
    that worker to start. The best's worker is now held from one race to the next, until the best changes."""
    import hashlib

    from harness.contract.results import Evaluation
    from harness.judge import race
    from harness.judge.context import VersionRun
    from harness.problem.load import load_problem
    from tests.conftest import add_version

    best = add_version(workspace, "good", "v001.py")
    other = add_version(workspace, "good", "v002.py")
    other.write_text(other.read_text() + "\n# another best\n")
    monkeypatch.setattr(ladder, "options", Options())
    loads: list[str] = []
    load_source = ladder.context.load_source
    monkeypatch.setattr(
        ladder.context,
        "load_source",
        lambda worker, data, name, *rest: loads.append(name) or load_source(worker, data, name, *rest),
    )
    problem = load_problem(workspace)

    def rival_for(path: Path) -> object:
        target = {"path": str(path), "hash": hashlib.sha256(path.read_bytes()).hexdigest()}
        run = VersionRun(
            problem=problem,
            path=workspace / "v009.py",
            ev=Evaluation(problem="vadd", version="v009", path="", hash=""),
            dsls=[],
        )
        worker, note = race._rival(ladder.context, run, target)
        assert worker is not None, note
        assert not run.workers  # not released with the evaluation
        return worker

    try:
        first = rival_for(best)
        assert rival_for(best) is first and loads == ["v001.py"]
        second = rival_for(other)
        assert second is not first and loads == ["v001.py", "v002.py"]
        assert first.proc.wait(timeout=30) is not None  # the former best's worker was released
        second.kill()
        assert rival_for(other) is not second  # one that died is started again
        assert ladder.pool.retire_spares() >= 1 and ladder.pool.held is None
    finally:
        ladder.pool.retire_spares()  # the held best's worker, should the test end early
