"""`kerneltui mcp` end to end: the official MCP client starts the server as a subprocess on a real
workspace and drives the ladder through it over stdio, as a coding agent would; the person speaks
through the real CLI; the history is read back from SQLite."""

from __future__ import annotations

import functools
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, Implementation, TextContent

from kerneltui.history.store import Store
from tests.conftest import REPO, VERSIONS, kerneltui, make_workspace, run

TOOLS = {
    "write_version", "wait_for_verdict", "read_results", "read_file", "search_context", "read_dump", "profile",
    "sanitize", "get_guidance",
}  # fmt: skip
CLIENT = "pytest-agent"
RUNGS = ["load", "compile", "correctness", "benchmark", "roofline", "dumps"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def server_args(workspace: Path, *extra: str) -> list[str]:
    """The server on `workspace`, with no user config (a config file that does not exist)."""
    return [
        "-m",
        "kerneltui",
        "mcp",
        "--workspace",
        str(workspace),
        "--config",
        str(workspace / "no-config.toml"),
        *extra,
    ]


INSTRUCTIONS: dict[int, str] = {}  # each connected session's: what the server told it in its initialize reply


@asynccontextmanager
async def connect(workspace: Path, *extra: str) -> AsyncIterator[ClientSession]:
    env = {k: v for k, v in os.environ.items() if k != "KERNELTUI_CONTEXT"}  # the workspace's context folder is used
    params = StdioServerParameters(command=sys.executable, args=server_args(workspace, *extra), cwd=REPO, env=env)
    with open(workspace.parent / "mcp-server.log", "a") as errlog:  # the server's stderr, kept for a failing test
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, client_info=Implementation(name=CLIENT, version="1.0")) as session,
        ):
            initialized = await session.initialize()
            assert initialized.server_info.version not in ("", "unknown"), initialized.server_info  # it was empty
            INSTRUCTIONS[id(session)] = initialized.instructions or ""
            yield session


def text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def person(*args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI, as the person watching types it (off the event loop, which serves the client)."""
    return await anyio.to_thread.run_sync(functools.partial(kerneltui, *args))


def rows(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


async def test_every_tool_takes_a_problem_and_bad_input_is_a_tool_error(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    workspace = folder.parent
    (workspace / "context").mkdir()
    (workspace / "context" / "ptx-notes.md").write_text("cp.async.bulk is TMA: 16-byte aligned copies.\n")
    (tmp_path / "secret.txt").write_text("the API key")
    async with connect(workspace) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert "problem" in tool.input_schema["required"] and tool.output_schema, tool.name
        verdict_schema = tools["write_version"].output_schema or {}
        assert {"version", "status", "failed_rung", "summary", "median_us", "rungs"} <= set(
            verdict_schema["properties"]
        )

        read = await session.call_tool("read_file", {"problem": "vadd", "path": "vadd/problem.py"})
        assert "def reference" in text(read) and data(read)["path"] == "vadd/problem.py"
        hits = await session.call_tool("search_context", {"problem": "vadd", "query": "cp.async"})
        assert "ptx-notes.md:1: cp.async.bulk is TMA" in data(hits)["text"]

        for path in ("../secret.txt", str(tmp_path / "secret.txt"), "/etc/passwd"):
            refused = await session.call_tool("read_file", {"problem": "vadd", "path": path})
            assert refused.is_error and "outside the folders this agent may read" in text(refused), path
            assert "the API key" not in text(refused)
        refusals = [
            ("read_file", {"problem": "nope", "path": "x"}, "no problem 'nope'"),
            ("read_file", {"problem": "../ws/vadd", "path": "x"}, "no problem '../ws/vadd'"),
            ("read_results", {"problem": "vadd", "version": "v999"}, "no results for 'v999'"),
            ("read_dump", {"problem": "vadd", "version": "v001", "kind": "sass"}, "no sass dump for v001"),
            ("write_version", {"problem": "vadd", "code": "print('hi')", "notes": ""}, "custom_kernel"),
            ("write_version", {"problem": "vadd", "notes": "no code"}, "Field required"),
        ]
        for name, args, expected in refusals:
            result = await session.call_tool(name, args)
            assert result.is_error and expected in text(result), (name, text(result))
        assert len((await session.list_tools()).tools) == len(TOOLS)  # still serving

    db = workspace / ".kerneltui" / "history.db"
    assert rows(db, "SELECT problem, backend, model FROM agent_sessions") == [("vadd", "mcp", CLIENT)]
    assert rows(db, "SELECT COUNT(*) FROM versions") == [(0,)]
    results = rows(db, "SELECT json_extract(data, '$.ok') FROM agent_events WHERE kind = 'tool_result'")
    assert [ok for (ok,) in results] == [1, 1, 0, 0, 0, 0, 0, 0]  # unknown problems and bad arguments never reach one


async def test_versions_are_judged_and_the_person_is_heard(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    workspace = folder.parent
    async with connect(workspace) as session:
        written: dict[str, CallToolResult] = {}

        async def write_good() -> None:
            code = (VERSIONS / "good.py").read_text()
            written["good"] = await session.call_tool("write_version", {"problem": "vadd", "code": code, "notes": "v1"})

        async with anyio.create_task_group() as group:
            group.start_soon(write_good)
            await anyio.sleep(0.2)
            await session.list_tools()
            assert "good" not in written  # answered while the judge worked: the event loop is never blocked
        passed = data(written["good"])
        assert (passed["version"], passed["status"], passed["failed_rung"]) == ("v001", "pass", None)
        assert [r["name"] for r in passed["rungs"]] == RUNGS
        assert text(written["good"]).startswith("v001: pass") and (folder / "v001.py").is_file()

        code = (VERSIONS / "pow2_only.py").read_text()
        wrong = await session.call_tool("write_version", {"problem": "vadd", "code": code, "notes": "no mask"})
        failed = data(wrong)
        assert (failed["version"], failed["status"], failed["failed_rung"]) == ("v002", "fail", "correctness")
        assert next(r for r in failed["rungs"] if r["name"] == "correctness")["ok"] is False
        assert "✗ correctness" in text(wrong) and "n=4097" in text(wrong)

        again = data(await session.call_tool("read_results", {"problem": "vadd", "version": "v002"}))
        assert (again["status"], again["failed_rung"]) == ("fail", "correctness") and "n=4097" in again["summary"]
        ptx = await session.call_tool("read_dump", {"problem": "vadd", "version": "v001", "kind": "ptx"})
        assert data(ptx)["text"].startswith("v001 ptx of add_kernel")

        guided = await person("guide", "vadd", "try 128-bit loads", "--workspace", str(workspace))
        rejected = await person("reject", str(folder / "v002.py"), "--reason", "fails n=4097")
        assert guided.returncode == 0 and rejected.returncode == 0, guided.stderr + rejected.stderr
        hint = await session.call_tool("read_results", {"problem": "vadd", "version": "v001"})
        assert "call get_guidance" in text(hint)

        heard = await session.call_tool("get_guidance", {"problem": "vadd"})
        items = data(heard)["items"]
        assert [(i["kind"], i["text"], i["version"], i["verdict"]) for i in items] == [
            ("verdict", "fails n=4097", "v002", "rejected"),
            ("guidance", "try 128-bit loads", None, None),
        ]
        assert "The person rejected v002: fails n=4097" in text(heard) and "try 128-bit loads" in text(heard)
        nothing = await session.call_tool("get_guidance", {"problem": "vadd"})
        assert data(nothing)["items"] == [] and "nothing new" in text(nothing)

    db = workspace / ".kerneltui" / "history.db"
    assert rows(db, "SELECT name, author FROM versions ORDER BY name") == [
        ("v001", f"mcp:{CLIENT}"),
        ("v002", f"mcp:{CLIENT}"),
    ]
    assert rows(db, "SELECT version, status FROM evaluations ORDER BY id") == [("v001", "pass"), ("v002", "fail")]
    [(backend, model, versions, ended, reason)] = rows(
        db, "SELECT backend, model, versions, ended, stop_reason FROM agent_sessions"
    )
    assert (backend, model, versions, reason) == ("mcp", CLIENT, 2, "the MCP client disconnected") and ended
    verdicts = rows(
        db,
        "SELECT json_extract(data, '$.version'), json_extract(data, '$.status') FROM agent_events "
        "WHERE kind = 'tool_result' AND json_extract(data, '$.tool') = 'write_version'",
    )
    assert verdicts == [("v001", "pass"), ("v002", "fail")]
    kinds = [kind for (kind,) in rows(db, "SELECT kind FROM agent_events ORDER BY id")]
    assert kinds[0] == "start" and kinds[-1] == "stop" and "feedback" in kinds
    assert kinds.count("tool_call") == kinds.count("tool_result") == 7
    assert rows(db, "SELECT COUNT(*) FROM guidance WHERE delivered IS NULL") == [(0,)]


async def test_a_session_started_by_the_agents_driver_is_joined(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    workspace = folder.parent
    store = Store(workspace / ".kerneltui" / "history.db")
    session_id = store.start_agent_session("vadd", "acp", "some-agent 1.0", os.getpid())
    store.close()
    missing = run(server_args(workspace, "--session", str(session_id + 1)))
    assert missing.returncode == 2 and f"no agent session {session_id + 1}" in missing.stderr

    async with connect(workspace, "--session", str(session_id)) as session:
        data(await session.call_tool("read_file", {"problem": "vadd", "path": "vadd/problem.py"}))
    db = workspace / ".kerneltui" / "history.db"
    assert rows(db, "SELECT id, backend, ended FROM agent_sessions") == [
        (session_id, "acp", None)
    ]  # its driver ends it
    events = rows(db, "SELECT session_id, kind FROM agent_events ORDER BY id")
    assert events == [(session_id, "tool_call"), (session_id, "tool_result")]


SLOW_LOAD = """
import time

time.sleep(8)  # judged for longer than the client waits for one call
"""


async def test_a_client_with_a_call_timeout_gets_progress_and_waits_on(tmp_path: Path) -> None:
    """write_version waited for the whole verdict and sent nothing meanwhile: Codex and the MCP Inspector give
    up on a call after 60 s, so a version judged for longer was lost to the agent. Now a call waits at most
    [agent] verdict_wait_s (here 2 s, the client's timeout 20 s), sending progress, and wait_for_verdict waits on."""
    folder = make_workspace(tmp_path / "ws")
    workspace = folder.parent
    (workspace / "no-config.toml").write_text("[agent]\nverdict_wait_s = 2\n")
    heard: list[tuple[float, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        heard.append((done, message))

    code = SLOW_LOAD + (VERSIONS / "good.py").read_text()
    async with connect(workspace) as session:
        first = await session.call_tool(
            "write_version", {"problem": "vadd", "code": code, "notes": "slow"}, 20.0, progress
        )
        judging = data(first)
        assert (judging["version"], judging["status"]) == ("v001", "judging"), judging
        assert "wait_for_verdict" in judging["summary"] and heard, (judging, heard)
        assert [done for done, _ in heard] == sorted({done for done, _ in heard})  # only ever increasing
        assert all(message and message.startswith("v001 ") for _, message in heard)
        for _ in range(60):  # each call returns within the client's 20 s
            verdict = data(await session.call_tool("wait_for_verdict", {"problem": "vadd", "version": "v001"}, 20.0))
            if verdict["status"] != "judging":
                break
        assert verdict["status"] == "pass", verdict
        missing = await session.call_tool("wait_for_verdict", {"problem": "vadd", "version": "v009"})
        assert missing.is_error and "no version 'v009'; versions: v001" in text(missing)


async def test_problems_hidden_from_the_server_are_closed_to_its_agents(tmp_path: Path) -> None:
    """In a bench each agent works on its own copy: an ACP agent's MCP tools opened the other agents' copies."""
    mine = make_workspace(tmp_path / "ws", "vadd")
    other = tmp_path / "ws" / "vadd--other"  # another agent's copy, a version in it
    other.mkdir()
    (other / "problem.py").write_text((mine / "problem.py").read_text())
    (other / "v001.py").write_text((VERSIONS / "good.py").read_text())
    async with connect(mine.parent, "--hide", "vadd--other") as session:
        own = await session.call_tool("read_file", {"problem": "vadd", "path": "vadd/problem.py"})
        assert not own.is_error, text(own)
        peek = await session.call_tool("read_file", {"problem": "vadd", "path": "vadd--other/v001.py"})
        assert peek.is_error and "another agent's work (vadd--other)" in text(peek), text(peek)
        lane = await session.call_tool("read_results", {"problem": "vadd--other", "version": "v001"})
        assert lane.is_error and "no problem 'vadd--other'" in text(lane), text(lane)
        # not even its name: a folder's listing and the server's instructions named the other agents' copies
        listed = await session.call_tool("read_file", {"problem": "vadd", "path": "."})
        assert "vadd/" in text(listed) and "vadd--other" not in text(listed), text(listed)
        assert "vadd" in INSTRUCTIONS[id(session)] and "vadd--other" not in INSTRUCTIONS[id(session)]


async def test_a_server_acts_only_for_the_problem_it_was_started_for(tmp_path: Path) -> None:
    """get_guidance on another problem took that problem's guidance (marked delivered) and its Agent pane: a server
    started for vadd (--problem, or the agent session it joins) refuses every tool called with another problem."""
    mine = make_workspace(tmp_path / "ws", "vadd")
    workspace = mine.parent
    other = workspace / "softmax"
    other.mkdir()
    (other / "problem.py").write_text((mine / "problem.py").read_text())
    (other / "v001.py").write_text((VERSIONS / "good.py").read_text())
    assert (await person("guide", "softmax", "only for softmax's agent", "--workspace", str(workspace))).returncode == 0
    store = Store(workspace / ".kerneltui" / "history.db")
    joined = store.start_agent_session("vadd", "acp", "some-agent 1.0", os.getpid())
    store.close()
    calls: list[tuple[str, dict[str, Any]]] = [
        ("get_guidance", {}),
        ("read_results", {"version": "v001"}),
        ("wait_for_verdict", {"version": "v001"}),
        ("read_file", {"path": "softmax/problem.py"}),
        ("read_dump", {"version": "v001", "kind": "sass"}),
        ("profile", {"version": "v001"}),
        ("sanitize", {"version": "v001"}),
        ("search_context", {"query": "softmax"}),
        ("write_version", {"code": (VERSIONS / "good.py").read_text(), "notes": "not mine"}),
    ]
    for started_for in (("--problem", "vadd"), ("--session", str(joined))):
        async with connect(workspace, *started_for) as session:
            for name, args in calls:
                refused = await session.call_tool(name, {"problem": "softmax", **args})
                assert refused.is_error and "acts for vadd only" in text(refused), (name, text(refused))
            own = await session.call_tool("read_file", {"problem": "vadd", "path": "vadd/problem.py"})
            assert not own.is_error, text(own)
            assert "softmax" not in INSTRUCTIONS[id(session)]
    db = workspace / ".kerneltui" / "history.db"
    assert rows(db, "SELECT text, delivered FROM guidance") == [("only for softmax's agent", None)]
    assert rows(db, "SELECT DISTINCT problem FROM agent_sessions") == [("vadd",)]
    assert rows(db, "SELECT COUNT(*) FROM versions WHERE problem = 'softmax' AND name != 'v001'") == [(0,)]
