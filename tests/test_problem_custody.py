"""What is judged is the person's problem and the recorded bytes: the real scheduler, its watcher and a real judge
(the run's shared one, reached through the harness Python kerneltui starts) on a real workspace."""

from __future__ import annotations

import hashlib
import queue
from collections.abc import Callable
from pathlib import Path

import pytest

from kerneltui.core.config import Config, LadderConfig
from kerneltui.core.judging.client import harness_python
from kerneltui.core.judging.scheduler import Scheduler, SchedulerEvent
from kerneltui.core.workspace import Workspace
from tests.conftest import VERSIONS, add_version, kerneltui, make_workspace

ZEROS = "import torch\n\n\ndef custom_kernel(a, b):\n    return torch.zeros_like(a)\n"
LOOSENED = "\ntolerance = {'atol': 1e9, 'rtol': 1e9}\n"

# The harness Python, started only once the test has set the stage: the versions queued before any is judged.
HELD_JUDGE = """#!/bin/sh
while [ ! -e {go} ]; do sleep 0.05; done
exec {python} "$@"
"""


def ladder(tmp_path: Path, held: bool = False, **values: object) -> LadderConfig:
    config = Config().ladder
    config.options = config.options.updated({"rungs": "load,correctness", "timeout": 60})
    config.judges = 1
    for key, value in values.items():
        setattr(config, key, value)
    if held:
        script = tmp_path / "held-python"
        script.write_text(HELD_JUDGE.format(go=tmp_path / "go", python=harness_python()))
        script.chmod(0o755)
        config.python = str(script)
    return config


class Events:
    def __init__(self) -> None:
        self.queue: queue.Queue[SchedulerEvent] = queue.Queue()
        self.seen: list[SchedulerEvent] = []

    def wait(self, wanted: Callable[[SchedulerEvent], bool], timeout: float = 300) -> SchedulerEvent:
        while True:
            event = self.queue.get(timeout=timeout)
            self.seen.append(event)
            if wanted(event):
                return event


def ended(version: str) -> Callable[[SchedulerEvent], bool]:
    def wanted(event: SchedulerEvent) -> bool:
        return (
            event.kind in ("finished", "failed")
            and event.version in (version, None)
            and event.evaluation_id is not None
        )

    return wanted


@pytest.mark.slow
def test_a_problem_changed_on_disk_is_judged_against_only_once_accepted(tmp_path: Path) -> None:
    """An agent loosened problem.py's tolerance to 1e9 and its zeros version passed. A change on disk is shown as
    a diff and not judged against until the person accepts it; then what was judged before is marked stale."""
    folder = make_workspace(tmp_path / "ws")
    add_version(folder, "good", "v001.py")
    events = Events()
    scheduler = Scheduler(Workspace(folder.parent), ladder(tmp_path), events.queue.put)
    scheduler.start()
    try:
        first = events.wait(ended("v001"))
        assert first.kind == "finished" and first.data["status"] == "pass", first
        problem = folder / "problem.py"
        problem.write_text(problem.read_text() + LOOSENED)
        changed = events.wait(lambda e: e.kind == "problem-changed")
        assert "+tolerance = {'atol': 1e9, 'rtol': 1e9}" in changed.data["diff"], changed.data["diff"]
        (folder / "v002.py").write_text(ZEROS)
        zeros = events.wait(ended("v002"))
        assert zeros.kind == "finished" and zeros.data["status"] == "fail", zeros  # the accepted tolerance
        assert scheduler.store is not None
        assert not any(r["stale"] for r in scheduler.store.version_rows("vadd"))
        scheduler.accept_problem("vadd", changed.data["digest"])
        accepted = events.wait(lambda e: e.kind == "accepted")
        assert accepted.data["stale"] == 2
        rows = {r["name"]: r for r in scheduler.store.version_rows("vadd")}
        assert rows["v001"]["stale"] and rows["v002"]["stale"], rows  # judged against the files before
        assert scheduler.store.problem_digests("vadd") == (changed.data["digest"], None)
    finally:
        scheduler.stop()


@pytest.mark.slow
def test_a_changed_problem_waits_across_restarts_and_the_cli_accepts_it(tmp_path: Path) -> None:
    """Edited while no kerneltui ran: still not judged against at the next start; `kerneltui accept-problem` shows
    the diff it accepts, and what it broke is judged again."""
    folder = make_workspace(tmp_path / "ws")
    workspace = Workspace(folder.parent)
    events = Events()
    scheduler = Scheduler(workspace, ladder(tmp_path), events.queue.put)
    scheduler.start()
    scheduler.started.wait(60)
    scheduler.stop()
    (folder / "problem.py").write_text((folder / "problem.py").read_text() + LOOSENED)
    (folder / "v001.py").write_text(ZEROS)
    events = Events()
    scheduler = Scheduler(workspace, ladder(tmp_path), events.queue.put)
    scheduler.start()
    try:
        zeros = events.wait(ended("v001"))
        assert zeros.kind == "finished" and zeros.data["status"] == "fail", zeros
    finally:
        scheduler.stop()
    said = kerneltui("accept-problem", "vadd", "--workspace", str(workspace.root))
    assert said.returncode == 0, said.stderr
    assert (
        "+tolerance = {'atol': 1e9, 'rtol': 1e9}" in said.stdout
        and "1 evaluation(s) judged against the earlier files" in said.stdout
    ), said.stdout
    again = kerneltui("accept-problem", "vadd", "--workspace", str(workspace.root))
    assert again.returncode == 0 and "nothing to accept" in again.stdout, again.stdout


@pytest.mark.slow
def test_a_version_swapped_after_it_was_queued_is_judged_as_recorded(tmp_path: Path) -> None:
    """A file swapped between queueing and judging: the history showed the queued source and hash beside the
    swapped file's result. The judge gets the bytes recorded, whatever the file holds by then."""
    folder = make_workspace(tmp_path / "ws")
    recorded = add_version(folder, "wrong_shape", "v001.py").read_bytes()
    events = Events()
    scheduler = Scheduler(Workspace(folder.parent), ladder(tmp_path, held=True), events.queue.put, watch=False)
    scheduler.start()
    try:
        scanned = events.wait(lambda e: e.kind == "scan")
        assert scanned.data["queued"] == 1
        (folder / "v001.py").write_bytes((VERSIONS / "good.py").read_bytes())  # no watcher: it stays queued as read
        (tmp_path / "go").touch()
        judged = events.wait(ended("v001"))
        assert judged.kind == "finished" and judged.data["status"] == "fail", judged
        assert scheduler.store is not None
        row = scheduler.store.evaluation(judged.evaluation_id or 0) or {}
        assert row["hash"] == hashlib.sha256(recorded).hexdigest() and row["status"] == "fail", row
    finally:
        scheduler.stop()


@pytest.mark.slow
def test_a_burst_from_one_problem_does_not_starve_another(tmp_path: Path) -> None:
    """One agent writing 40 versions at once put another problem's version 41st: problems take turns."""
    busy = make_workspace(tmp_path / "ws", "vadd")
    quiet = tmp_path / "ws" / "vadd2"
    quiet.mkdir()
    (quiet / "problem.py").write_bytes((busy / "problem.py").read_bytes())
    for number in range(1, 41):
        add_version(busy, "good", f"v{number:03d}.py")
    add_version(quiet, "good", "v001.py")
    events = Events()
    config = ladder(tmp_path, held=True, rejudge_stale=False)
    scheduler = Scheduler(Workspace(busy.parent), config, events.queue.put, watch=False)
    scheduler.start()
    try:
        assert events.wait(lambda e: e.kind == "scan").data["queued"] == 41
        (tmp_path / "go").touch()
        started: list[str] = []
        while "vadd2" not in started and len(started) < 3:
            event = events.wait(lambda e: e.kind == "started")
            started.append(str(event.problem))
        assert started[:2] == ["vadd", "vadd2"], started
    finally:
        scheduler.stop()


@pytest.mark.slow
def test_eval_judges_against_the_accepted_problem_and_says_so(tmp_path: Path) -> None:
    """`kerneltui eval` has no watcher: it looks at the problem's files itself, and judges against the accepted."""
    folder = make_workspace(tmp_path / "ws")
    good = add_version(folder, "good", "v001.py")
    assert kerneltui("eval", str(good), "--rungs", "load,correctness").returncode == 0
    (folder / "problem.py").write_text((folder / "problem.py").read_text() + LOOSENED)
    zeros = folder / "v002.py"
    zeros.write_text(ZEROS)
    done = kerneltui("eval", str(zeros), "--rungs", "load,correctness")
    assert done.returncode == 1 and "vadd's files changed on disk and are not accepted" in done.stderr, done.stderr
    assert kerneltui("accept-problem", "vadd", "--workspace", str(folder.parent)).returncode == 0
    again = kerneltui("eval", str(zeros), "--rungs", "load,correctness")
    assert again.returncode == 0 and "not accepted" not in again.stderr, again.stdout + again.stderr


@pytest.mark.parametrize("rewrite", ["crlf", "not-utf8"])
def test_a_problem_file_of_any_bytes_leaves_its_versions_current(tmp_path: Path, rewrite: str) -> None:
    """A problem.py with CRLF line endings or bytes that are not UTF-8 showed every version stale (↻): the
    judge's digest of the problem and the history's were computed differently."""
    folder = make_workspace(tmp_path / "ws")
    problem = folder / "problem.py"
    data = problem.read_bytes()
    problem.write_bytes(data.replace(b"\n", b"\r\n") if rewrite == "crlf" else b"# caf\xe9\n" + data)
    add_version(folder, "good", "v001.py")
    events = Events()
    scheduler = Scheduler(Workspace(folder.parent), ladder(tmp_path), events.queue.put)
    scheduler.start()
    try:
        first = events.wait(ended("v001"))
        assert first.kind == "finished" and first.data["status"] == "pass", first
        assert scheduler.store is not None
        rows = scheduler.store.version_rows("vadd")
        assert [r["name"] for r in rows if not r["stale"]] == ["v001"], rows
        from harness.problem.load import load_problem

        accepted, _ = scheduler.store.problem_digests("vadd")
        assert load_problem(folder).hash == accepted  # the judge's digest of a problem is the history's
    finally:
        scheduler.stop()
