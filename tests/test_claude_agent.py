"""The Claude agent through the real anthropic SDK, against a local server that speaks the Messages API.

`kerneltui agent` runs as a subprocess with its own judges; the scripted model reads each tool result
as the SDK sent it, and the person's guidance and rejection are sent with the real CLI meanwhile.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, VERDICT_LADDER, VERSIONS, kerneltui, make_workspace, run
from tests.messages_api import MessagesAPI, Reply, error, text, tool_use

GOOD = (VERSIONS / "good.py").read_text()
WRONG = (VERSIONS / "pow2_only.py").read_text()
TOOLS = [
    "write_version", "wait_for_verdict", "read_results", "read_file", "search_context", "read_dump", "profile",
    "sanitize",
]  # fmt: skip


def tool_result(message: dict[str, Any], call_id: str) -> str:
    found = [b for b in message["content"] if b.get("type") == "tool_result" and b.get("tool_use_id") == call_id]
    assert found, f"no tool_result for {call_id} in {message}"
    content = found[0]["content"]
    return content if isinstance(content, str) else " ".join(c.get("text", "") for c in content)


def user_text(message: dict[str, Any]) -> str:
    return " ".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")


def agent_cli(workspace: Path, api: MessagesAPI, config: Path, *extra: str) -> Any:
    env = {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "test-key", "XDG_CONFIG_HOME": str(config.parent)}
    args = ["-m", "kerneltui", "agent", "vadd", "--workspace", str(workspace), "--config", str(config), *extra]
    return run(args, env=env, timeout=600)


def rows(workspace: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(workspace / ".kerneltui" / "history.db") as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.slow
def test_claude_writes_versions_reads_results_takes_guidance_and_stops(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    workspace = folder.parent
    config = tmp_path / "config.toml"
    agent = '[agent]\nmodel = "claude-sonnet-4-6"\ntimeout = 30\nretry_wait = 0.1\n'
    config.write_text(agent + VERDICT_LADDER + "timeout = 20\n")

    def script(number: int, body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if number == 1:
            assert "def reference" in user_text(last) and "custom_kernel" in user_text(last)
            assert "Guidance from the person: start with one warp" in user_text(last)  # sent before the start
            return Reply(
                [text("A plain masked add first."), tool_use("t1", "write_version", code=GOOD, notes="add")], "tool_use"
            )
        if number == 2:
            assert "v001: pass" in tool_result(last, "t1")
            return Reply([tool_use("t2", "write_version", code=WRONG, notes="power-of-two blocks only")], "tool_use")
        if number == 3:
            result = tool_result(last, "t2")
            assert "v002: fail" in result and "correctness" in result and "n=" in result, result
            assert kerneltui("guide", "vadd", "use", "8", "warps", "--workspace", str(workspace)).returncode == 0
            rejected = kerneltui("reject", str(folder / "v002.py"), "--reason", "wrong for odd n [tail]")
            assert rejected.returncode == 0, rejected.stderr
            return Reply([tool_use("t3", "read_results", version="v002")], "tool_use")
        if number == 4:
            assert "v002: fail" in tool_result(last, "t3")
            said = user_text(last)
            assert "use 8 warps" in said and "rejected v002: wrong for odd n [tail]" in said, said
            return Reply([text("Understood: stopping here.")], "end_turn")
        raise AssertionError("a request after the model ended its turn")

    assert kerneltui("guide", "vadd", "start with one warp", "--workspace", str(workspace)).returncode == 0
    with MessagesAPI(script) as api:
        done = agent_cli(workspace, api, config, "--max-versions", "5")
    assert not api.failures, api.failures
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(api.requests) == 4
    assert "◆ judged vadd/v001: pass" in done.stdout and "◆ judged vadd/v002: fail" in done.stdout, done.stdout
    first = api.requests[0]
    assert first.headers["authorization"] == "Bearer test-key"
    assert first.body["stream"] is True and first.body["model"] == "claude-sonnet-4-6"
    assert [t["name"] for t in first.body["tools"]] == TOOLS
    assert first.body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first.body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert api.requests[3].body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    history = rows(
        workspace,
        "SELECT e.version, e.status, v.author FROM evaluations e JOIN versions v ON v.id = e.version_id ORDER BY e.id",
    )
    assert history == [("v001", "pass", "claude:claude-sonnet-4-6"), ("v002", "fail", "claude:claude-sonnet-4-6")]
    session = rows(workspace, "SELECT backend, model, versions, turns, stop_reason, cost_usd FROM agent_sessions")
    # per turn: 1200 in, 2000 cache write (x1.25), 5000 cache read (x0.1) at $3/MTok; 300 out at $15/MTok
    per_turn = (1200 + 2000 * 1.25 + 5000 * 0.1) * 3e-6 + 300 * 15e-6
    assert session[0][:5] == ("claude", "claude-sonnet-4-6", 2, 4, "the model ended its turn")
    assert abs(session[0][5] - 4 * per_turn) < 1e-9
    kinds = [k for (k,) in rows(workspace, "SELECT kind FROM agent_events ORDER BY id")]
    assert kinds[0] == "start" and kinds[-1] == "stop" and kinds.count("tool_call") == 3 and "feedback" in kinds
    assert rows(workspace, "SELECT COUNT(*) FROM guidance WHERE delivered IS NULL") == [(0,)]
    assert "v002: fail" in done.stdout and "stopped: the model ended its turn" in done.stdout


@pytest.mark.slow
def test_api_errors_are_retried_or_reported_and_nothing_is_lost(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    workspace = folder.parent
    config = tmp_path / "config.toml"
    config.write_text("[agent]\ntimeout = 1.5\nmax_retries = 3\nretry_wait = 0.1\nstream = true\n" + VERDICT_LADDER)
    replies = {
        1: error(429, "rate_limit_error", "slow down", **{"retry-after-ms": "20"}),  # the SDK retries these three
        2: error(529, "overloaded_error", "Overloaded", **{"retry-after-ms": "20"}),
        3: Reply([text("late")], stall_s=4.0),  # past the client's 1.5 s: a timeout
        4: Reply(break_stream=True),  # 200, then an overloaded error event: the agent tries the turn again
        5: Reply([tool_use("t1", "write_version", code=GOOD, notes="add")], "tool_use"),
    }

    def script(number: int, body: dict[str, Any]) -> Reply:
        if number in replies:
            return replies[number]
        if number == 6:
            assert "v001: pass" in tool_result(body["messages"][-1], "t1")
            return error(400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum")
        raise AssertionError("a request after a 400")

    with MessagesAPI(script) as api:
        done = agent_cli(workspace, api, config)
    assert not api.failures, api.failures
    assert len(api.requests) == 6
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "API error 400: prompt is too long" in done.stdout
    assert "stream broke: overloaded_error" in done.stdout  # the retry, in the transcript
    assert (folder / "v001.py").read_text().startswith('"""') and "custom_kernel" in (folder / "v001.py").read_text()
    assert rows(workspace, "SELECT version, status FROM evaluations") == [("v001", "pass")]
    reason = rows(workspace, "SELECT stop_reason, ended IS NOT NULL FROM agent_sessions")[0]
    assert reason[0].startswith("API error 400") and reason[1] == 1
    history = json.loads(kerneltui("history", "--json", "--workspace", str(workspace)).stdout)
    assert [h["version"] for h in history] == ["v001"]


@pytest.mark.slow
def test_without_credentials_the_agent_says_what_to_set(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    done = run(
        ["-m", "kerneltui", "agent", "vadd", "--workspace", str(folder.parent)],
        env={"ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": "", "XDG_CONFIG_HOME": str(tmp_path)},
    )
    assert done.returncode == 2 and "ANTHROPIC_API_KEY" in done.stderr
    assert not list(folder.glob("v*.py"))


def paused_times(workspace: Path) -> int:
    try:
        return rows(workspace, "SELECT COUNT(*) FROM agent_events WHERE kind = 'paused'")[0][0]
    except sqlite3.OperationalError:  # the history is not made yet
        return 0


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.2)


def _ctrl_c_as_in_a_terminal() -> None:
    """In the agent's process before it starts: Ctrl-C's default action, as a person's shell gives it. A suite run
    in the background (a CI job, `cmd &`) hands its children SIGINT ignored, and Python keeps it so: the Ctrl-C
    this test sends would never reach the agent, which then waits, paused, for the test's whole timeout."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_a_spent_budget_pauses_the_agent_until_the_person_grants_more(tmp_path: Path) -> None:
    """A budget spent used to end the agent; it pauses it: guidance waits with it, `kerneltui grant` from another
    shell lets it go on with the budget again, and a stop while paused ends it saying why."""
    folder = make_workspace(tmp_path / "ws")
    workspace = folder.parent
    config = tmp_path / "config.toml"
    config.write_text("[agent]\nretry_wait = 0.1\nstream = false\n" + VERDICT_LADDER)  # plain JSON replies

    def script(number: int, body: dict[str, Any]) -> Reply:
        if number == 1:  # guidance that arrives as the budget runs out waits, paused, with the agent
            assert kerneltui("guide", "vadd", "try 8 warps", "--workspace", str(workspace)).returncode == 0
        elif number == 2:
            assert "try 8 warps" in user_text(body["messages"][-1])
        else:
            raise AssertionError("a request while the agent was paused")
        return Reply([tool_use(f"t{number}", "write_version", code=GOOD, notes="add")], "tool_use")

    env = {**os.environ, "ANTHROPIC_API_KEY": "test-key", "XDG_CONFIG_HOME": str(tmp_path)}
    with MessagesAPI(script) as api:
        env["ANTHROPIC_BASE_URL"] = api.url
        args = ["agent", "vadd", "--workspace", str(workspace), "--config", str(config), "--max-versions", "1"]
        agent = subprocess.Popen(
            [sys.executable, "-m", "kerneltui", *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=_ctrl_c_as_in_a_terminal,
        )
        try:
            wait_until(lambda: paused_times(workspace) == 1, 300, "the agent to pause")
            assert rows(workspace, "SELECT text, delivered FROM guidance") == [("try 8 warps", None)]
            assert len(api.requests) == 1
            granted = kerneltui("grant", "vadd", "--versions", "1", "--workspace", str(workspace))
            assert granted.returncode == 0 and "granted 1 more version to the agent on vadd" in granted.stdout
            wait_until(lambda: paused_times(workspace) == 2, 300, "the agent to go on and pause again")
            agent.send_signal(signal.SIGINT)
            said, _ = agent.communicate(timeout=120)
        finally:
            agent.kill()
    assert not api.failures, api.failures
    assert len(api.requests) == 2
    assert "paused until you grant more (+ on the dashboard, or kerneltui grant vadd)" in said, said
    assert "stopped: wrote 2 versions (the budget); stopped while paused" in said, said
    again = kerneltui("grant", "vadd", "--workspace", str(workspace))
    assert again.returncode == 1 and "no agent on vadd is paused" in again.stderr


def test_a_budget_spent_waits_for_a_grant_and_a_target_reached_stops() -> None:
    from agents.base import Budget, go_on

    class Person:  # the host's side of a pause: grants once, then stops the agent
        def __init__(self) -> None:
            self.asked: list[str] = []
            self.pauses_on_budget = True

        def wait_for_more(self, reason: str, budget: Budget) -> Budget | None:
            self.asked.append(reason)
            return budget.extended(2, 1.0) if len(self.asked) == 1 else None

    person = Person()
    budget = Budget(max_versions=3, max_cost_usd=0.5, target_roofline_pct=80)
    assert go_on(person, budget, 2, 0.1, None) == (budget, "")  # type: ignore[arg-type]
    more, why = go_on(person, budget, 3, 0.1, None)  # type: ignore[arg-type]
    assert why == "" and more == Budget(5, 1.5, 80) and person.asked == ["wrote 3 versions (the budget)"]
    _, why = go_on(person, more, 4, 2.0, None)  # type: ignore[arg-type]
    assert why == "spent $2.00 (budget $1.50); stopped while paused"
    assert go_on(person, more, 9, 9.0, 85.0)[1] == "reached 85% of roofline (target 80%)"  # type: ignore[arg-type]
    assert len(person.asked) == 2
    person.pauses_on_budget = False  # unattended (a benchmark): the budget ends it
    assert go_on(person, budget, 3, 0.1, None)[1] == "wrote 3 versions (the budget)"  # type: ignore[arg-type]
    assert len(person.asked) == 2


def test_budget_reasons() -> None:
    from agents.base import Budget, budget_reason

    assert budget_reason(Budget(target_roofline_pct=80), 3, 0.0, 85.2) == "reached 85% of roofline (target 80%)"
    assert budget_reason(Budget(target_roofline_pct=80), 3, 0.0, 79.0) is None
    assert budget_reason(Budget(max_versions=4), 3, 0.0, None) is None
    assert budget_reason(Budget(), 300, 1e6, 100.0) is None


@pytest.mark.slow
def test_a_reply_cut_at_max_tokens_is_continued(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    config = tmp_path / "config.toml"
    config.write_text("[agent]\nretry_wait = 0.1\n" + VERDICT_LADDER)

    def script(number: int, body: dict[str, Any]) -> Reply:
        if number == 1:
            return Reply([text("Let me think about the tail handling in great det")], "max_tokens")
        assert "cut off at the output token limit" in user_text(body["messages"][-1])
        return Reply([text("Done thinking.")], "end_turn")

    with MessagesAPI(script) as api:
        done = agent_cli(folder.parent, api, config)
    assert not api.failures, api.failures
    assert done.returncode == 0 and "stopped: the model ended its turn" in done.stdout
    assert len(api.requests) == 2


def test_a_fault_of_ours_is_not_reported_as_missing_credentials(monkeypatch: Any) -> None:
    """Any TypeError in a turn read "no Anthropic credentials", sending the person off to set a key they had."""
    import anthropic
    import pytest

    from agents.claude import ClaudeAgent, TurnFailed

    class Silent:
        def record(self, *args: Any, **kwargs: Any) -> None:
            pass

    agent = ClaudeAgent(retry_wait=0.0)
    messages = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    keyless = anthropic.Anthropic(base_url="http://127.0.0.1:9", max_retries=0)
    with pytest.raises(TurnFailed, match="no Anthropic credentials"):
        agent._turn(keyless, "system", [], messages, Silent())  # type: ignore[arg-type]
    keyed = anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1:9", max_retries=0)
    with pytest.raises(TurnFailed) as failed:
        agent._turn(keyed, "system", [], [{"role": "user", "content": None}], Silent())  # type: ignore[arg-type]
    assert "credentials" not in str(failed.value) and "TypeError" in str(failed.value)
