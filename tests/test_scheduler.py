"""The scheduler's queue against judges that misbehave (real processes, a real history)."""

from __future__ import annotations

import queue
from pathlib import Path

import pytest

from kerneltui.core.config import Config
from kerneltui.core.judging.client import JudgeClient, LocalProcess
from kerneltui.core.judging.scheduler import Scheduler, SchedulerEvent
from kerneltui.core.workspace import Workspace
from tests.conftest import add_version, make_workspace

# Says it is ready, then closes its end of the requests pipe and dies: the next request meets a broken pipe.
DIES_AFTER_READY = """#!/bin/sh
echo '{"event": "ready", "device": {"kind": "cpu", "name": "fake"}}'
exec 0<&-
sleep 1
exit 3
"""


@pytest.mark.slow
def test_a_judge_that_dies_after_ready_does_not_stop_the_scheduler(tmp_path: Path) -> None:
    """Sending a version to a judge that died after saying ready raised BrokenPipeError in the scheduler's
    thread, which ended it: judging stopped with nothing said."""
    folder = make_workspace(tmp_path / "ws")
    add_version(folder, "good", "v001.py")
    fake = tmp_path / "python"
    fake.write_text(DIES_AFTER_READY)
    fake.chmod(0o755)
    config = Config()
    config.ladder.python = str(fake)
    events: queue.Queue[SchedulerEvent] = queue.Queue()
    scheduler = Scheduler(Workspace(folder.parent), config.ladder, events.put)
    scheduler.start()
    try:
        warning = None
        while warning is None:
            event = events.get(timeout=120)
            if event.kind == "warning" and "keeps stopping" in event.data.get("message", ""):
                warning = event.data["message"]
        assert scheduler.thread.is_alive()
        assert scheduler.store is not None
        rows = scheduler.store.rows("SELECT status, error FROM evaluations")
        assert rows and all(r["status"] in ("queued", "error") for r in rows), rows
    finally:
        scheduler.stop()


@pytest.mark.slow
def test_a_changed_problem_is_judged_again_when_the_config_says_so(tmp_path: Path) -> None:
    """[ladder] rejudge_stale: every version judged against the old problem.py is judged again against the new,
    once the person accepts it."""
    folder = make_workspace(tmp_path / "ws")
    add_version(folder, "good", "v001.py")
    config = Config()
    config.ladder.rejudge_stale = True
    config.ladder.options = config.ladder.options.updated({"rungs": "load", "timeout": 30})
    events: queue.Queue[SchedulerEvent] = queue.Queue()
    scheduler = Scheduler(Workspace(folder.parent), config.ladder, events.put)

    def finished() -> SchedulerEvent:
        while True:
            event = events.get(timeout=300)
            if event.kind in ("finished", "failed"):
                return event

    scheduler.start()
    try:
        first = finished()
        problem = folder / "problem.py"
        problem.write_text(problem.read_text() + "\ncases = cases + [{'n': 12345}]\n")
        while (changed := events.get(timeout=300)).kind != "problem-changed":
            pass
        scheduler.accept_problem("vadd", changed.data["digest"])  # judged against once the person accepts it
        again = finished()
        assert again.evaluation_id != first.evaluation_id and again.version == "v001"
        assert scheduler.store is not None
        rows = scheduler.store.version_rows("vadd")
        assert rows[0]["evaluation_id"] == again.evaluation_id and not rows[0]["stale"], rows
    finally:
        scheduler.stop()


@pytest.mark.slow
def test_a_file_named_like_a_version_that_is_not_one_is_named_once(tmp_path: Path) -> None:
    """v008_fast.py was ignored without a word: the agent or the person never learnt why it was not judged."""
    folder = make_workspace(tmp_path / "ws")
    add_version(folder, "good", "v008_fast.py")  # there at start
    config = Config()
    config.ladder.options = config.ladder.options.updated({"rungs": "load", "timeout": 30})
    events: queue.Queue[SchedulerEvent] = queue.Queue()
    scheduler = Scheduler(Workspace(folder.parent), config.ladder, events.put)

    def warnings_until(words: str) -> list[str]:
        said: list[str] = []
        while not any(words in w for w in said):
            event = events.get(timeout=120)
            if event.kind == "warning":
                said.append(event.data["message"])
        return said

    scheduler.start()
    try:
        said = warnings_until("v008_fast.py")
        assert "vadd/v008_fast.py is not judged: versions are named vNNN.py (e.g. v008.py)" in said
        scheduler.started.wait(60)
        add_version(folder, "good", "V9.py")  # written while watched
        said = warnings_until("V9.py")
        assert "vadd/V9.py is not judged: versions are named vNNN.py (e.g. v009.py)" in said
        (folder / "V9.py").write_text((folder / "V9.py").read_text() + "\n# again\n")
        add_version(folder, "good", "v001.py")
        while (event := events.get(timeout=120)).kind not in ("finished", "failed"):
            assert not (event.kind == "warning" and "V9.py" in event.data["message"]), "said twice"
    finally:
        scheduler.stop()


def pinned(judge: JudgeClient) -> str:
    """The GPU a local judge's process is given."""
    assert isinstance(judge.transport, LocalProcess)
    return judge.transport.env["CUDA_VISIBLE_DEVICES"]


def test_judges_are_pinned_to_the_gpus_kerneltui_was_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Judges were pinned to CUDA_VISIBLE_DEVICES=0,1 whatever kerneltui was given: started with "2,3" it judged on
    GPUs 0 and 1, someone else's. (The GPU count is the one thing faked: this machine has none.)"""
    from kerneltui.core.config import LadderConfig
    from kerneltui.core.judging import judges as judges_mod

    monkeypatch.setattr(judges_mod, "cuda_device_count", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    judges = judges_mod.make_judges(LadderConfig(), Workspace(tmp_path), queue.Queue().put)
    assert [pinned(j) for j in judges] == ["2", "3"]
    assert [j.where for j in judges] == ["GPU 2", "GPU 3"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    judges = judges_mod.make_judges(LadderConfig(), Workspace(tmp_path), queue.Queue().put)
    assert [pinned(j) for j in judges] == ["0", "1"]


@pytest.mark.slow
def test_versions_written_together_hear_their_verdicts_before_earlier_versions_finish(tmp_path: Path) -> None:
    """The scheduler sent a judge one version at a time, so the second version's verdict waited for the whole of
    the first one's ladder: it sends a local judge several, which judges each one's verdict first."""
    folder = make_workspace(tmp_path / "ws")
    add_version(folder, "good", "v001.py")
    add_version(folder, "good", "v002.py")
    config = Config()
    config.ladder.options = config.ladder.options.updated({"rungs": "load,compile,correctness,benchmark,dumps"})
    events: queue.Queue[SchedulerEvent] = queue.Queue()
    scheduler = Scheduler(Workspace(folder.parent), config.ladder, events.put)
    scheduler.start()
    try:
        order: list[tuple[int | None, str]] = []
        while sum(1 for _, what in order if what in ("finished", "failed")) < 2:
            event = events.get(timeout=300)
            if event.kind == "rung":
                order.append((event.evaluation_id, event.data["rung"]))
            elif event.kind in ("finished", "failed"):
                order.append((event.evaluation_id, event.kind))
                assert event.data.get("status") == "pass", event
        first, second = sorted({evaluation for evaluation, _ in order if evaluation is not None})
        assert order.index((second, "correctness")) < order.index((first, "dumps")), order
        assert order.count((first, "finished")) == order.count((second, "finished")) == 1, order
        assert scheduler.store is not None  # the parked one's dumps came from its workers, frozen and thawed
        dumps = scheduler.store.rows("SELECT evaluation_id, ok FROM rungs WHERE name = 'dumps'")
        assert sorted((r["evaluation_id"], r["ok"]) for r in dumps) == [(first, 1), (second, 1)], dumps
    finally:
        scheduler.stop()


# Says ready, takes two requests, begins the first and dies; started again (MARKER there), it is the real judge.
DIES_AFTER_BEGINNING_ONE = """#!/bin/sh
if [ -e "{marker}" ]; then exec "{python}" "$@"; fi
touch "{marker}"
exec "{python}" -c '
import json, sys
print(json.dumps({{"event": "ready", "device": {{"kind": "cpu", "name": "fake"}}}}), flush=True)
first, second = json.loads(sys.stdin.readline()), sys.stdin.readline()
print(json.dumps({{"event": "start", "id": first["id"], "path": first["path"]}}), flush=True)
sys.exit(3)
'
"""


@pytest.mark.slow
def test_a_judge_that_dies_fails_what_it_began_and_judges_again_what_only_waited_in_it(tmp_path: Path) -> None:
    """A local judge is sent versions ahead: when it died, every version sent to it was failed, also those it had
    not begun (nothing of theirs ran). Only what it began fails; the rest is queued again and judged."""
    import sys

    folder = make_workspace(tmp_path / "ws")
    add_version(folder, "good", "v001.py")
    add_version(folder, "good", "v002.py")
    fake = tmp_path / "python"
    fake.write_text(DIES_AFTER_BEGINNING_ONE.format(marker=tmp_path / "died", python=sys.executable))
    fake.chmod(0o755)
    config = Config()
    config.ladder.python = str(fake)
    config.ladder.options = config.ladder.options.updated({"rungs": "load,correctness"})
    events: queue.Queue[SchedulerEvent] = queue.Queue()
    scheduler = Scheduler(Workspace(folder.parent), config.ladder, events.put)
    scheduler.start()
    try:
        ended: dict[str, str] = {}
        while len(ended) < 2:
            event = events.get(timeout=300)
            if event.kind in ("finished", "failed") and scheduler.store is not None:
                row = scheduler.store.evaluation(event.evaluation_id) or {}
                ended.setdefault(str(row.get("version")), str(row.get("status")))
        assert ended == {"v001": "error", "v002": "pass"}, ended
    finally:
        scheduler.stop()
