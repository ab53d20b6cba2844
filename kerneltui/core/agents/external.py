"""Agents that kerneltui does not run (a coding agent over MCP): their tool calls and their sessions.

Such an agent calls the built-in agents' tools (agents/tools.py) and get_guidance one call at a time,
naming the problem each time. Each problem it works on gets an agent session in the history (backend
"mcp", model: the client's name), opened at its first call, so the dashboard's Agent pane shows what
it did: every call and its result are events of that session. The Session owns this; the MCP server
only speaks the protocol. Calls block (a write waits for its verdict): a front end makes them from
worker threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from agents.base import Feedback, Judged, render_feedback
from agents.tools import Toolbox, ToolError, record_call, record_result
from kerneltui.core.agents.host import Judging, StoreHost, find_context, problem_info
from kerneltui.core.workspace import Workspace, WorkspaceError
from kerneltui.history.store import Store, now

BACKEND = "mcp"
CLOSE_WAIT_S = 10.0  # how long closing waits for a tool call in flight (a stopped write returns within 0.2 s)
# An MCP agent is never prompted: it learns of the person's word only by asking, so its results say so.
GUIDANCE_HINT = "\n\n[the person has sent guidance or a verdict since you last asked: call get_guidance]"


@dataclass
class ToolOutcome:
    """What a tool call came to: the text the agent reads, and the data behind it."""

    text: str
    ok: bool
    judged: Judged | None = None
    feedback: list[Feedback] = field(default_factory=list)


Progress = Callable[[float, str], None]


@dataclass
class Lane:
    """One problem's agent session. Its host and history connection are used by one thread at a time."""

    host: StoreHost
    toolbox: Toolbox
    owned: bool  # started here, so ended here (a joined session is ended by whoever started it)
    lock: threading.Lock = field(default_factory=threading.Lock)


class ExternalAgents:
    """The external agents' work: calls on one problem run one at a time, each recorded."""

    def __init__(
        self, workspace: Workspace, configured_context: str | None, judges: Judging | None, wait_s: float = 45.0
    ) -> None:
        self.workspace, self.configured_context, self.judges = workspace, configured_context, judges
        self.wait_s = wait_s  # how long one call waits for a verdict: MCP clients give up after about a minute
        self.joined: tuple[int, str] | None = None  # (session id, problem) recorded into instead of a new session
        self.hidden: tuple[Path, ...] = ()  # problem folders closed to these agents (other agents' in a bench)
        self.lanes: dict[str, Lane] = {}
        self.guard = threading.Lock()
        self.closed = False

    @cached_property
    def context(self) -> Path | None:
        return find_context(self.workspace, self.configured_context)

    def join(self, session_id: int) -> None:
        """Records the calls on its problem into an existing agent session (one the process driving the
        agent started), which must exist; WorkspaceError when it does not."""
        self.joined = joined_session(self.workspace, session_id)

    def tool_call(
        self, problem: str, client: str, tool: str, args: dict[str, Any], progress: Progress | None = None
    ) -> ToolOutcome:
        """One of agents/tools.py's tools; ToolError when it refused. `progress` hears of a verdict awaited."""

        def work(lane: Lane) -> ToolOutcome:
            lane.host.progress = progress
            try:
                return toolbox_work(tool, args, lane)
            finally:
                lane.host.progress = None

        return self._use(problem, client, tool, args, work)

    def guidance(self, problem: str, client: str) -> ToolOutcome:
        return self._use(problem, client, "get_guidance", {}, guidance_work)

    def _use(
        self, problem: str, client: str, tool: str, args: dict[str, Any], work: Callable[[Lane], ToolOutcome]
    ) -> ToolOutcome:
        lane = self.lane(problem, client)
        with lane.lock:
            host = lane.host
            record_call(host, tool, args)
            try:
                done = work(lane)
            except Exception as exc:  # a broken history or a kerneltui bug is the tool's error, never the server's end
                done = ToolOutcome(f"{tool} failed inside kerneltui: {type(exc).__name__}: {exc}", False)
                host.record("error", done.text)
            record_result(host, tool, done.text, done.ok, done.judged if tool == "write_version" else None)
            if done.ok and tool != "get_guidance" and waiting_feedback(host):
                done.text += GUIDANCE_HINT
        if not done.ok:
            raise ToolError(done.text)
        return done

    def lane(self, problem: str, client: str) -> Lane:
        with self.guard:
            if self.closed:
                raise ToolError("the kerneltui MCP server is stopping")
            if problem not in self.lanes:
                self.lanes[problem] = self._open(problem, client)
            return self.lanes[problem]

    def _open(self, problem: str, client: str) -> Lane:
        hidden = {h.resolve() for h in self.hidden}
        known = sorted(p.name for p in self.workspace.problems() if p.resolve() not in hidden)
        if problem not in known:  # also refuses names that would lead out of the workspace
            raise ToolError(f"no problem {problem!r} in {self.workspace.root} (problems: {', '.join(known) or 'none'})")
        info = problem_info(self.workspace, problem, self.context, self.hidden)
        store = Store.open(self.workspace.db_path, check=False).store
        if self.joined is not None and self.joined[1] == problem:
            session_id, owned = self.joined[0], False
        else:
            session_id, owned = store.start_agent_session(problem, BACKEND, client, os.getpid()), True
        host = StoreHost(self.workspace, info, store, session_id, self.judges, wait_s=self.wait_s)
        if owned:
            host.record("start", f"{client} on {problem}, through MCP", model=client, backend=BACKEND)
        return Lane(host, Toolbox(host, author=f"{BACKEND}:{client}"), owned)

    def close(self, reason: str) -> None:
        """Ends the sessions started here, once; a write still waiting for its verdict returns 'stopped'."""
        if self.closed:
            return
        self.closed = True  # first: a signal handler that finds it set knows closing is under way
        with self.guard:
            lanes, self.lanes = list(self.lanes.values()), {}
        for lane in lanes:
            lane.host.stop.set()
        for lane in lanes:
            if not lane.lock.acquire(timeout=CLOSE_WAIT_S):
                continue  # a call still holds the connection: leave it (the process ends anyway)
            try:
                end_lane(lane, reason)
            finally:
                lane.lock.release()


def end_lane(lane: Lane, reason: str) -> None:
    host = lane.host
    if lane.owned:
        host.record("stop", reason, versions=host.versions_written)
        host.store.update_agent_session(host.session_id, ended=now(), stop_reason=reason)
    host.store.close()


def toolbox_work(tool: str, args: dict[str, Any], lane: Lane) -> ToolOutcome:
    text, ok = lane.toolbox.call(tool, args)
    judged = None
    if ok and tool == "write_version":
        judged = lane.toolbox.written[-1]
    elif ok and tool == "read_results":
        judged = lane.host.results(str(args["version"]).strip())
    elif ok and tool == "wait_for_verdict":
        judged = lane.toolbox.waited
    return ToolOutcome(text, ok, judged)


def guidance_work(lane: Lane) -> ToolOutcome:
    items = lane.host.feedback()
    if not items:
        return ToolOutcome("nothing new from the person since the last call", True)
    text = render_feedback(items)
    lane.host.record("feedback", text, count=len(items))
    return ToolOutcome(text, True, feedback=items)


def waiting_feedback(host: StoreHost) -> bool:
    """Guidance or verdicts get_guidance would deliver."""
    return host.store.feedback_waiting(host.problem.name, host.last_verdict)


def joined_session(workspace: Workspace, session_id: int) -> tuple[int, str]:
    """(id, problem) of an agent session, which must exist."""
    store = Store.open(workspace.db_path, check=False).store
    try:
        session = store.agent_session(session_id)
    finally:
        store.close()
    if session is None:
        raise WorkspaceError(f"no agent session {session_id} in {workspace.db_path}")
    return session_id, str(session["problem"])
