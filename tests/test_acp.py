"""External agents over ACP: a scripted agent (the ACP SDK, a real subprocess over stdio) that writes
versions through kerneltui's MCP server and the client's file methods, asks permission, is
interrupted, and hears the person's guidance; headless and in the dashboard."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kerneltui.core.config import Config
from kerneltui.core.workspace import Workspace
from kerneltui.ui.app import KernelTUI
from tests.conftest import FIXTURES, REPO, VERDICT_LADDER, VERDICT_RUNGS, kerneltui, make_workspace
from tests.test_dashboard import SIZE, wait_for

AGENT = f"{sys.executable} {FIXTURES / 'acp_agent.py'}"


def rows(workspace: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with sqlite3.connect(workspace / ".kerneltui" / "history.db") as conn:
        return conn.execute(sql, params or []).fetchall()


def said(workspace: Path, kind: str = "text") -> list[str]:
    try:
        return [t for (t,) in rows(workspace, "SELECT text FROM agent_events WHERE kind = ? ORDER BY id", [kind])]
    except sqlite3.OperationalError:  # the history is not made yet
        return []


def heard(workspace: Path, text: str) -> bool:
    """The agent said this, alone or as a paragraph of a longer message."""
    return any(text in said_text.split("\n\n") for said_text in said(workspace))


@pytest.mark.slow
def test_headless_acp_agent_writes_versions_and_hears_results_and_guidance(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "ws").parent
    config, spec = tmp_path / "config.toml", tmp_path / "mcp-spec.json"
    config.write_text(VERDICT_LADDER + "timeout = 30\n")
    argv = [
        sys.executable,
        "-m",
        "kerneltui",
        "agent",
        "vadd",
        "--workspace",
        str(workspace),
        "--acp",
        AGENT,
        "--permissions",
        "allow",
        "--max-versions",
        "3",
        "--on-budget",
        "stop",
        "--config",
        str(config),
    ]
    env = dict(os.environ, KERNELTUI_MARK="handed", ANTHROPIC_API_KEY="sk-secret", ACP_SCRIPT_SPEC=str(spec))
    agent = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 180
        while not any("v002: fail" in p for p in said(workspace, "prompt")) and time.monotonic() < deadline:
            assert agent.poll() is None, agent.stdout.read() if agent.stdout else ""
            time.sleep(0.2)
        # its turn over and nothing left to judge, it says it waits for the person (it once waited silently)
        while not said(workspace, "waiting") and time.monotonic() < deadline:
            assert agent.poll() is None, agent.stdout.read() if agent.stdout else ""
            time.sleep(0.2)
        assert (
            kerneltui("guide", "vadd", "use BLOCK 2048 [mask the tail]", "--workspace", str(workspace)).returncode == 0
        )
        out, _ = agent.communicate(timeout=180)
    finally:
        agent.kill()
    assert agent.returncode == 0, out
    assert "stopped: wrote 3 versions (the budget)" in out, out
    assert "waiting: the agent ended its turn with no version left to judge" in out, out
    assert rows(workspace, "SELECT version, status FROM evaluations ORDER BY version") == [
        ("v001", "pass"),
        ("v002", "fail"),
        ("v003", "pass"),
    ]
    texts = "\n\n".join(said(workspace))
    assert heard(workspace, "A plain masked add first [v001].") and heard(workspace, "permission: once")
    assert "results: v001 pass" in texts and "v002 fail" in texts  # v002's verdict: in that prompt or the next
    assert heard(workspace, "heard: use BLOCK 2048 [mask the tail]")
    assert said(workspace, "plan") == ["read the reference; write v001; v002"]
    assert said(workspace, "thought") == ["a + b, masked."]
    assert said(workspace, "permission_answer") == ["python bench.py --all: Allow once"]
    assert rows(workspace, "SELECT COUNT(*) FROM guidance WHERE delivered IS NULL") == [(0,)]
    mcp_calls = [t for t in said(workspace, "tool_result") if "v001: pass" in t or "v003: pass" in t]
    assert len(mcp_calls) >= 2  # the agent read the ladder's verdicts through the MCP server
    # Handed to the MCP server explicitly (agents start it with an environment of their own): the person's
    # config and kerneltui's own variables, never an API key. The scripted agent uses only that environment.
    handed = json.loads(spec.read_text())
    assert handed["args"][-4:-2] == ["--config", str(config)], handed["args"]
    assert handed["env"]["KERNELTUI_MARK"] == "handed" and "ANTHROPIC_API_KEY" not in handed["env"]


def test_file_methods_stay_inside_the_workspace(tmp_path: Path) -> None:
    from agents.acp import AcpAgent, _Client
    from kerneltui.core.agents.host import StoreHost, problem_info
    from kerneltui.history.store import Store

    workspace = Workspace(make_workspace(tmp_path / "ws").parent)
    (tmp_path / "secret.txt").write_text("key")
    store = Store(workspace.db_path)
    host = StoreHost(workspace, problem_info(workspace, "vadd", None), store, 1)
    client = _Client(AcpAgent(["true"]), host)

    async def calls() -> None:
        from acp import RequestError

        text = await client.read_text_file("s", str(workspace.root / "vadd" / "problem.py"), line=1, limit=3)
        assert text.content.count("\n") == 3
        for bad in ("../../secret.txt", str(tmp_path / "secret.txt")):
            with pytest.raises(RequestError):
                await client.read_text_file("s", bad)
            with pytest.raises(RequestError):
                await client.write_text_file("s", bad, "x")
        await client.write_text_file("s", "notes/plan.md", "ok")

    asyncio.run(calls())
    assert (workspace.root / "vadd" / "notes" / "plan.md").read_text() == "ok"
    assert (tmp_path / "secret.txt").read_text() == "key"


def test_file_writes_never_touch_a_problems_own_files(tmp_path: Path) -> None:
    """fs/write_text_file rewrote problem.py (tolerance 1e9), its own and another problem's, and a zeros version
    passed. Writes go to versions and scratch sub-folders of the agent's own problem folder; the rest is refused."""
    from acp import RequestError

    from agents.acp import AcpAgent, _Client
    from kerneltui.core.agents.host import StoreHost, problem_info
    from kerneltui.history.store import Store

    workspace = Workspace(make_workspace(tmp_path / "ws").parent)
    other = make_workspace(workspace.root, "unitrows")
    mine = workspace.root / "vadd"
    (mine / "task.py").write_text("SIZES = [1, 2]\n")
    (mine / "notes").mkdir()
    (mine / "notes" / "problem.py").symlink_to(mine / "problem.py")  # a link in scratch to the problem's file
    before = {p: p.read_bytes() for p in (mine / "problem.py", mine / "task.py", other / "problem.py")}
    store = Store(workspace.db_path)
    client = _Client(AcpAgent(["true"]), StoreHost(workspace, problem_info(workspace, "vadd", None), store, 1))
    refused: dict[str, str] = {}

    async def calls() -> None:
        for bad in (
            "problem.py",
            str(mine / "problem.py"),
            "task.py",  # a file problem.py reads
            "reference.py",  # a new file at the top, where problem.py would import it from
            "notes/problem.py",
            "../unitrows/problem.py",
            "../unitrows/v002.py",  # another problem's folder, even a version
            "../newproblem/problem.py",
            "v001_fast.py",
        ):
            with pytest.raises(RequestError) as caught:
                await client.write_text_file("s", bad, "tolerance = {'atol': 1e9, 'rtol': 1e9}\n")
            refused[bad] = str(caught.value.data)
        await client.write_text_file("s", "v002.py", "def custom_kernel(a, b):\n    return a + b\n")
        await client.write_text_file("s", "notes/plan.md", "ok")

    asyncio.run(calls())
    store.close()
    assert {p: p.read_bytes() for p in before} == before
    assert not (workspace.root / "newproblem").exists() and not (mine / "reference.py").exists()
    assert "the problem's own file, the person's to change" in refused["problem.py"], refused
    assert "only inside their problem's folder (vadd/)" in refused["../unitrows/v002.py"], refused
    assert (mine / "v002.py").is_file() and (mine / "notes" / "plan.md").read_text() == "ok"


@pytest.mark.slow
async def test_dashboard_asks_permission_inline_interrupts_and_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACP_SCRIPT_LONG", "1")  # after results, the agent works until interrupted
    workspace = Workspace(make_workspace(tmp_path / "ws").parent)
    config = Config()
    config.agent.backend, config.agent.acp, config.agent.permissions = "acp", AGENT, "ask"
    config.ladder.options = config.ladder.options.updated({"rungs": VERDICT_RUNGS})
    app = KernelTUI(workspace, config)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.scheduler is not None and app.snapshot.problem == "vadd", pilot, timeout=30)
        await pilot.press("s")
        await wait_for(lambda: "vadd" in app.asks, pilot, timeout=120)
        await pilot.press("5")
        pane = app.query_one("#agent-view")
        await wait_for(lambda: "[y] allow once" in pane.plain, pilot, timeout=60)  # type: ignore[attr-defined]
        await pilot.press("a")  # allow always: answers the request, approves nothing
        await wait_for(lambda: heard(workspace.root, "permission: always"), pilot, timeout=30)
        assert rows(workspace.root, "SELECT COUNT(*) FROM verdicts") == [(0,)]
        await wait_for(lambda: heard(workspace.root, "profiling for a long while"), pilot, timeout=120)
        await pilot.press("i", *"try BLOCK 4096", "enter")
        await wait_for(lambda: "waiting for an agent" in pane.plain, pilot, timeout=60)  # type: ignore[attr-defined]
        await pilot.press("escape")
        await wait_for(lambda: heard(workspace.root, "heard: try BLOCK 4096"), pilot, timeout=60)
        assert heard(workspace.root, "interrupted") and said(workspace.root, "interrupt")
        await pilot.press("x")
        await wait_for(lambda: not app.agents, pilot, timeout=30)
    assert rows(workspace.root, "SELECT stop_reason FROM agent_sessions") == [("stopped by the person",)]
    assert said(workspace.root, "permission_answer") == ["python bench.py --all: Allow always"]


def headless(workspace: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "kerneltui", "agent", "vadd", "--workspace", str(workspace), "--acp", AGENT]
    argv += ["--permissions", "allow", *extra]
    if "--config" not in extra:
        argv += ["--config", with_config(workspace, "")]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, env=dict(os.environ, **env))


@pytest.mark.slow
def test_an_agent_that_asks_to_authenticate_gets_the_key_it_names(tmp_path: Path) -> None:
    """kerneltui never sent ACP authenticate: codex-acp refused session/new with "Authentication required"
    though its key was set."""
    workspace = make_workspace(tmp_path / "ws").parent
    done = headless(
        workspace, {"ACP_SCRIPT_AUTH": "1", "SCRIPTED_API_KEY": "k"}, "--max-versions", "1", "--on-budget", "stop"
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert said(workspace, "auth") == ["authenticated: Use SCRIPTED_API_KEY"]
    assert rows(workspace, "SELECT version, status FROM evaluations")[:1] == [("v001", "pass")]


@pytest.mark.slow
def test_an_agent_that_needs_a_login_says_its_ways_in(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "ws").parent
    env = {"ACP_SCRIPT_AUTH": "1", "SCRIPTED_API_KEY": ""}
    done = headless(workspace, env, "--max-versions", "1", "--on-budget", "stop")
    out = done.stdout + done.stderr
    assert "asks to authenticate and no API key it accepts is set" in out, out[-3000:]
    assert "Log in (run `scripted login` first)" in out


@pytest.mark.slow
def test_sigterm_stops_an_agent_deaf_to_cancel_and_closes_its_session(tmp_path: Path) -> None:
    """SIGTERM (or Ctrl-C) during a slow cancel exited 0 and left the session open in the history."""
    workspace = make_workspace(tmp_path / "ws").parent
    argv = [sys.executable, "-m", "kerneltui", "agent", "vadd", "--workspace", str(workspace), "--acp", AGENT]
    argv += ["--config", with_config(workspace, "")]
    env = dict(os.environ, ACP_SCRIPT_LONG="1", ACP_SCRIPT_IGNORE_CANCEL="1")
    agent = subprocess.Popen([*argv, "--permissions", "allow"], cwd=REPO, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not heard(workspace, "profiling for a long while") and time.monotonic() < deadline:
            assert agent.poll() is None, agent.stdout.read() if agent.stdout else ""
            time.sleep(0.2)
        agent.terminate()
        out, _ = agent.communicate(timeout=120)
    finally:
        agent.kill()
    assert agent.returncode == 143, out[-3000:]
    assert "turn failed" not in out and "connection failed" not in out, out[-3000:]  # a stop, not a failure
    ended = rows(workspace, "SELECT ended IS NOT NULL, stop_reason FROM agent_sessions")
    events = rows(workspace, "SELECT kind, text FROM agent_events ORDER BY id")[-4:]
    assert ended and ended[0][0] == 1 and ended[0][1], (ended, events, out[-2000:])


def with_config(workspace: Path, text: str) -> str:
    path = workspace / "agent-config.toml"
    path.write_text(VERDICT_LADDER + text)
    return str(path)


@pytest.mark.slow
def test_an_agent_that_never_starts_is_stopped_with_a_reason(tmp_path: Path) -> None:
    """kerneltui had no timeout of its own: an agent that never answered sat there with nothing said."""
    workspace = make_workspace(tmp_path / "ws").parent
    config = with_config(workspace, "[agent]\nstartup_timeout_s = 3\n")
    start = time.monotonic()
    done = headless(workspace, {"ACP_SCRIPT_MUTE_START": "1"}, "--config", config)
    out = done.stdout + done.stderr
    assert "the agent did not start within 3 s (startup_timeout_s)" in out, out[-3000:]
    assert time.monotonic() - start < 120
    ended = rows(workspace, "SELECT ended IS NOT NULL, stop_reason FROM agent_sessions")
    assert ended and ended[0][0] == 1 and "did not start" in ended[0][1]


@pytest.mark.slow
def test_a_silent_turn_says_so_then_ends(tmp_path: Path) -> None:
    """Failing agents sat silent for minutes with nothing on the headless output."""
    workspace = make_workspace(tmp_path / "ws").parent
    config = with_config(workspace, "[agent]\nsilence_timeout_s = 5\n")
    done = headless(workspace, {"ACP_SCRIPT_MUTE": "1"}, "--config", config)
    out = done.stdout + done.stderr
    assert "agent: thinking it over" in out, out[-3000:]
    assert "  … the agent has said nothing for" in out, out[-3000:]  # the heartbeat, before the end
    assert "■ stopped: the agent said nothing for" in out and "(silence_timeout_s)" in out, out[-3000:]
    assert said(workspace, "silent")


@pytest.mark.slow
def test_an_agents_failure_shows_its_details_and_its_stderr(tmp_path: Path) -> None:
    """codex-acp's "could not reach its API" came out as "Internal error", the cause nowhere."""
    workspace = make_workspace(tmp_path / "ws").parent
    done = headless(workspace, {"ACP_SCRIPT_FAIL": "1"})
    out = done.stdout + done.stderr
    assert "could not reach api.openai.com: connection refused" in out, out[-3000:]
    assert "its stderr" in out and "error sending request for url" in out, out[-3000:]
    assert out.count("could not reach api.openai.com") == 1, out[-3000:]  # printed once, not as error and stop
    assert "■ stopped by the error above" in out


def test_claude_code_as_root_gets_the_flag_it_needs_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """As root (common in GPU containers) the default Claude adapter exited with code 1, the reason hidden."""
    from agents.acp import agent_env

    class Host:
        def __init__(self) -> None:
            self.events: list[tuple[str, str]] = []

        def record(self, kind: str, text: str = "", **data: Any) -> None:
            self.events.append((kind, text))

    monkeypatch.delenv("IS_SANDBOX", raising=False)
    monkeypatch.delenv("GEMINI_CLI_TRUST_WORKSPACE", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    host = Host()
    assert agent_env(["/usr/local/bin/claude-agent-acp"], host)["IS_SANDBOX"] == "1"  # type: ignore[arg-type]
    assert host.events == [("warning", "IS_SANDBOX=1 set for claude-code (running as root): it needs it to work "
                            "under kerneltui")]  # fmt: skip
    assert "IS_SANDBOX" not in agent_env(["gemini", "--acp"], Host())  # type: ignore[arg-type]
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "IS_SANDBOX" not in agent_env(["claude-agent-acp"], Host())  # type: ignore[arg-type]
    # Gemini CLI starts no MCP server in a folder it does not trust: kerneltui's tools never reached it
    assert agent_env(["gemini", "--acp"], Host())["GEMINI_CLI_TRUST_WORKSPACE"] == "true"  # type: ignore[arg-type]


def test_the_stderr_tail_keeps_the_words_not_colour_codes_or_stack_frames(tmp_path: Path) -> None:
    from agents.acp import said_on_stderr

    log = tmp_path / "agent.log"
    log.write_text(
        "old run's line\n"
        "\x1b[2m2026-12-04T15:49:38Z\x1b[0m \x1b[31mERROR\x1b[0m codex_api: stream disconnected\n"
        "Attempt 8 failed. Retrying with backoff... fetch failed\n"
        "    at async Promise.all (index 0)\n"
        "    at retryWithBackoff (file:///x/retry.js:94:30)\n"
        "}\n"
    )
    tail = said_on_stderr(log, since=len("old run's line\n"))
    assert "\x1b" not in tail and "ERROR codex_api: stream disconnected" in tail
    assert "Attempt 8 failed" in tail and " at " not in tail and "old run" not in tail


@pytest.mark.slow
def test_a_daemon_the_agent_leaves_behind_ends_with_its_session(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "ws").parent
    pid_file = tmp_path / "daemon.pid"
    done = headless(workspace, {"ACP_SCRIPT_CHILD": str(pid_file), "ACP_SCRIPT_FAIL": "1"})
    assert pid_file.exists(), done.stdout[-2000:] + done.stderr[-2000:]
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
        if state == "Z":
            break  # ended, waiting to be reaped by whoever adopted it
        time.sleep(0.2)
    alive = Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    assert not alive, f"the agent's daemon {pid} outlived its session"
