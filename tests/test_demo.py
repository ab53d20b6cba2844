"""The demo and agents in the dashboard: replayed sessions judged for real, steered with the keys."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from textual.pilot import Pilot

from agents.replay import builtin_recordings, load_recording
from kerneltui.core.config import Config
from kerneltui.demo import make_demo_workspace
from kerneltui.ui.app import KernelTUI
from kerneltui.ui.widgets.agent import AgentPane
from kerneltui.ui.widgets.problems import ProblemTable
from kerneltui.ui.widgets.versions import VersionTable
from tests.test_dashboard import SIZE, notified, status_of, wait_for

pytestmark = pytest.mark.slow  # every test here judges versions or runs the app end to end

EXPECTED = {
    "softmax": {"v001": "pass", "v002": "fail", "v003": "pass", "v004": "fail", "v005": "pass"},
    "vecadd": {"v001": "pass", "v002": "fail", "v003": "pass"},
}


def statuses(workspace: Path, problem: str) -> dict[str, str]:
    with sqlite3.connect(workspace / ".kerneltui" / "history.db") as conn:
        found = conn.execute("SELECT version, status FROM evaluations WHERE problem = ? ORDER BY id", [problem])
        return dict(found.fetchall())


async def open_problem(app: KernelTUI, pilot: Pilot[None], name: str) -> None:
    """The first problem listed is rmsnorm where CuTeDSL is installed: open the one the test is about."""
    problems = app.query_one("#problems", ProblemTable)
    await wait_for(lambda: name in problems.names, pilot, timeout=30)
    app.select_problem(name)
    await wait_for(lambda: app.snapshot.problem == name, pilot, timeout=30)


def test_shipped_recordings_are_whole() -> None:
    recordings = builtin_recordings()
    assert set(EXPECTED) <= set(recordings)
    for problem, folder in recordings.items():
        recording = load_recording(folder)
        assert recording.problem_file.is_file() and len(recording.steps) >= 3
        assert all("def custom_kernel" in step.code and step.say for step in recording.steps), problem


async def test_demo_replays_two_problems_while_the_person_steers(tmp_path: Path) -> None:
    workspace = make_demo_workspace(tmp_path)
    config = Config()
    config.agent.backend, config.agent.pace, config.ladder.judges = "replay", 0.05, 2
    config.ladder.options = config.ladder.options.updated({"seeds": 1})  # the interpreter is slow: CI's time
    app = KernelTUI(workspace, config, autostart=sorted(EXPECTED))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(app.agents) == 2, pilot, timeout=30)
        await open_problem(app, pilot, "softmax")
        await wait_for(lambda: status_of(app, "v001") == "pass", pilot, timeout=120)
        await pilot.press("i", *"keep the mask [cols]", "enter")
        table = app.query_one("#versions", VersionTable)
        table.move_cursor(row=table.order.index("v001"))
        await pilot.press("a")
        await wait_for(lambda: not app.agents, pilot, timeout=300)
        await wait_for(lambda: status_of(app, "v005") == "pass", pilot, timeout=30)
        # the other agent's last versions may still wait for the watcher and the queue on a loaded machine
        done = lambda: all(statuses(workspace.root, p) == e for p, e in EXPECTED.items())  # noqa: E731
        await wait_for(done, pilot, timeout=180)
        await pilot.press("5")
        pane = app.query_one("#agent-view", AgentPane)
        await wait_for(lambda: "the recording is finished" in pane.plain, pilot, timeout=10)
        assert "keep the mask [cols]" in pane.plain and "(delivered)" in pane.plain
        assert "✗ compile" in pane.plain  # v004's failure, under its write_version
    for problem, expected in EXPECTED.items():
        assert statuses(workspace.root, problem) == expected
    with sqlite3.connect(workspace.db_path) as conn:
        feedback = [t for (t,) in conn.execute("SELECT text FROM agent_events WHERE kind = 'feedback'")]
        authors = {a for (a,) in conn.execute("SELECT DISTINCT author FROM versions")}
        verdicts = conn.execute("SELECT problem, version, verdict FROM verdicts").fetchall()
        sessions = conn.execute("SELECT problem, stop_reason FROM agent_sessions ORDER BY problem").fetchall()
    assert any("keep the mask [cols]" in t for t in feedback) and any("approved v001" in t for t in feedback)
    assert authors == {"replay:claude-opus-4-6"}
    assert verdicts == [("softmax", "v001", "approved")]
    assert sessions == [(p, "the recording is finished") for p in sorted(EXPECTED)]


async def test_start_needs_credentials_and_x_stops_an_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    workspace = make_demo_workspace(tmp_path)
    app = KernelTUI(workspace, Config())
    async with app.run_test(size=SIZE) as pilot:
        await open_problem(app, pilot, "softmax")
        await pilot.press("s")
        assert notified(app, "set ANTHROPIC_API_KEY") and not app.agents
        app.config.agent.backend, app.config.agent.pace = "replay", 100.0  # its first step waits 200 s
        await pilot.press("s")
        await wait_for(lambda: "softmax" in app.agents, pilot, timeout=10)
        await pilot.press("s")
        assert notified(app, "already working on softmax")
        await pilot.press("x")
        await wait_for(lambda: not app.agents, pilot, timeout=10)
        assert notified(app, "agent on softmax stopped: stopped by the person")
    with sqlite3.connect(workspace.db_path) as conn:
        assert conn.execute("SELECT stop_reason FROM agent_sessions").fetchall() == [("stopped by the person",)]
    assert not list((workspace.root / "softmax").glob("v*.py"))
