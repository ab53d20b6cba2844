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


def test_a_version_unreadable_when_an_interlude_reaches_it_fails_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ladder: Ladder
) -> None:
    """A version asked for and then deleted (by an agent, say) before the judge read it: the read's error ended the
    judge, and, met in an interlude between another version's steps past its verdict, it failed that version's
    rung instead. It now fails alone, saying why, and the other version goes on to its end."""
    import json
    import os
    import threading
    import time

    from harness.contract import protocol
    from harness.judge import ladder as ladder_module
    from harness.judge import serve

    folder = make_workspace(tmp_path / "ws")
    first, second = add_version(folder, "good", "v001.py"), add_version(folder, "good", "v002.py")
    real_read = ladder_module.read_version

    def deleted_after_asking(path: Path, limit: int) -> bytes:
        if path.name == second.name:
            path.unlink()  # after the request was taken (its file checked), before the judge reads it
        return real_read(path, limit)

    monkeypatch.setattr(ladder_module, "read_version", deleted_after_asking)
    read_end, write_end = os.pipe()
    requests = serve.RequestLines(os.fdopen(read_end))
    writer = os.fdopen(write_end, "w")
    said: list[protocol.JudgeEvent] = []

    def emit(event: protocol.JudgeEvent) -> None:
        said.append(event)
        if isinstance(event, protocol.RungFinished) and (event.rung.name, event.id) == ("benchmark", 1):
            writer.write(json.dumps({"path": str(second), "id": 2}) + "\n")  # past the first one's verdict
            writer.flush()
            deadline = time.monotonic() + 30
            while not requests.waiting() and time.monotonic() < deadline:
                time.sleep(0.01)  # read in: the interlude before the roofline meets it
        if isinstance(event, protocol.Finished | protocol.Failed) and event.id == 1:
            writer.close()

    values = {"rungs": ["load", "correctness", "benchmark", "roofline"]}
    idle = serve.IdleSpares(ladder.pool, 0)
    server = serve.Server(ladder, values, emit, idle, once=False)
    ended = threading.Event()

    def judge() -> None:
        try:
            server.run(requests)
        finally:
            ended.set()

    threading.Thread(target=judge, daemon=True).start()
    writer.write(json.dumps({"path": str(first), "id": 1}) + "\n")
    writer.flush()
    assert ended.wait(300), said
    steps = [(type(e).__name__, getattr(getattr(e, "rung", None), "name", None), e.id) for e in said]
    failed = next(e for e in said if isinstance(e, protocol.Failed))
    assert failed.id == 2 and failed.error == "v002.py could not be read: No such file or directory", failed
    finished = next(e for e in said if isinstance(e, protocol.Finished))
    assert finished.id == 1 and finished.evaluation.status == "pass", steps
    assert steps.index(("Failed", None, 2)) < steps.index(("RungFinished", "roofline", 1)), steps
