"""The scheduler's queue against judges that misbehave (real processes, a real history)."""

from __future__ import annotations

import queue
from pathlib import Path

from kerneltui.core.config import Config
from kerneltui.core.scheduler import Scheduler, SchedulerEvent
from kerneltui.core.workspace import Workspace
from tests.conftest import add_version, make_workspace

# Says it is ready, then closes its end of the requests pipe and dies: the next request meets a broken pipe.
DIES_AFTER_READY = """#!/bin/sh
echo '{"event": "ready", "device": {"kind": "cpu", "name": "fake"}}'
exec 0<&-
sleep 1
exit 3
"""


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


def test_a_changed_problem_is_judged_again_when_the_config_says_so(tmp_path: Path) -> None:
    """[ladder] rejudge_stale: every version judged against the old problem.py is judged again against the new."""
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
        again = finished()
        assert again.evaluation_id != first.evaluation_id and again.version == "v001"
        assert scheduler.store is not None
        rows = scheduler.store.version_rows("vadd")
        assert rows[0]["evaluation_id"] == again.evaluation_id and not rows[0]["stale"], rows
    finally:
        scheduler.stop()
