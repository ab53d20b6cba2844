"""`kerneltui mcp`: the verification ladder as an MCP server over stdio, for any coding agent.

The tools are the built-in agents' (agents/tools.py), each taking the problem's name too, plus
get_guidance: write_version writes the next vNNN.py, waits for the ladder and returns its verdict
rung by rung, as structured content and as text. Versions are judged by this process's scheduler,
or by the kerneltui already judging the workspace (its watcher sees the file; the verdict comes
through the history either way). Every call and its result is an event of an agent session per
problem (backend "mcp", model: the client's name), so the dashboard's Agent pane shows what the
external agent did. stdout is the MCP channel: notes go to stderr.

The MCP SDK (and pydantic, and the judges' machinery) is imported only when the server starts: the
CLI builds its parser from this module, and importing the SDK takes most of a second. That is why this
module does without `from __future__ import annotations`: the tools are closures whose annotations
name types imported inside a function, and the SDK reads those annotations as objects.
"""

import argparse
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn, TypeVar, cast

from typing_extensions import TypedDict  # pydantic needs it below Python 3.12 for nested TypedDicts

from agents.base import Feedback, Judged, render_feedback
from agents.tools import TOOLS, TOOLS_BY_NAME, Toolbox, ToolError, ToolSpec, record_call, record_result
from kerneltui.core.workspace import Workspace, WorkspaceError, resolve
from kerneltui.history.store import Store, now

if TYPE_CHECKING:
    from pathlib import Path

    from mcp.server.mcpserver import MCPServer
    from mcp_types import CallToolResult

    from kerneltui.core.agent_host import StoreHost
    from kerneltui.core.scheduler import SchedulerEvent

EXIT_OK = 0
BACKEND = "mcp"
UNNAMED_CLIENT = "mcp client"
CLOSE_WAIT_S = 10.0  # how long closing waits for a tool call in flight (a stopped write returns within 0.2 s)
T = TypeVar("T")

# --- what the tools return, as structured content -------------------------------------------------
# TypedDicts, not pydantic models: the SDK derives the output schemas from either, and these cost
# nothing to import.


class Rung(TypedDict):
    """One rung of the ladder: ok is true (passed), false (failed) or null (skipped, saying why)."""

    name: str
    ok: bool | None
    err: str | None
    skipped: str | None
    seconds: float
    metrics: dict[str, Any]


class Verdict(TypedDict):
    """The ladder's verdict on a version. status: pass, fail, unverified, error, or stopped (the server
    stopped while it waited); summary: the verdict rung by rung, with the failure's message."""

    problem: str
    version: str
    status: str
    failed_rung: str | None
    summary: str
    median_us: float | None
    roofline_pct: float | None
    speedup: float | None
    rungs: list[Rung]


class FileText(TypedDict):
    """A window of a file: numbered lines, with a note of how to read on when it was cut."""

    problem: str
    path: str
    text: str


class SearchHits(TypedDict):
    """Matching lines of the context folder as path:line: text, the files with most matching words first."""

    problem: str
    query: str
    text: str


class DumpText(TypedDict):
    """A window (or the grep) of a version's compiled code."""

    problem: str
    version: str
    kind: str
    text: str


class GuidanceItem(TypedDict):
    """Guidance typed by the person, or their verdict (approved/rejected) on a version with its reason as text."""

    kind: Literal["guidance", "verdict"]
    text: str
    version: str | None
    verdict: str | None
    who: str
    created: str


class Guidance(TypedDict):
    """What the person said since the last call: the items, and the same as text."""

    problem: str
    items: list[GuidanceItem]
    text: str


def rung_of(data: dict[str, Any]) -> Rung:
    return Rung(
        name=str(data.get("name")),
        ok=data.get("ok"),
        err=data.get("err"),
        skipped=data.get("skipped"),
        seconds=float(data.get("seconds") or 0.0),
        metrics=data.get("metrics") or {},
    )


def item_of(feedback: Feedback) -> GuidanceItem:
    kind: Literal["guidance", "verdict"] = "verdict" if feedback.kind == "verdict" else "guidance"
    return GuidanceItem(
        kind=kind,
        text=feedback.text,
        version=feedback.version,
        verdict=feedback.verdict,
        who=feedback.who,
        created=feedback.created,
    )


def verdict_of(problem: str, judged: Judged) -> Verdict:
    return Verdict(
        problem=problem,
        version=judged.version,
        status=judged.status,
        failed_rung=judged.data.get("failed_rung"),
        summary=judged.summary,
        median_us=judged.median_us,
        roofline_pct=judged.roofline_pct,
        speedup=judged.speedup,
        rungs=[rung_of(r) for r in judged.data.get("rungs", [])],
    )


# --- the work, in worker threads ----------------------------------------------------------------


@dataclass
class Done:
    """What a tool call came to: the text the agent reads, and the data behind it."""

    text: str
    ok: bool
    judged: Judged | None = None
    feedback: list[Feedback] = field(default_factory=list)


@dataclass
class Lane:
    """One problem's agent session. Its host and history connection are used by one thread at a time."""

    host: "StoreHost"
    toolbox: Toolbox
    owned: bool  # started here, so ended here (a joined session is ended by whoever started it)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Ladder:
    """The tools' work, off the event loop: calls on one problem run one at a time, each recorded."""

    def __init__(
        self,
        workspace: Workspace,
        context: "Path | None",
        enqueue: Callable[["Path"], None] | None,
        joined: tuple[int, str] | None = None,
    ) -> None:
        self.workspace, self.context, self.enqueue, self.joined = workspace, context, enqueue, joined
        self.lanes: dict[str, Lane] = {}
        self.guard = threading.Lock()
        self.closed = False

    def call(self, problem: str, client: str, tool: str, args: dict[str, Any]) -> Done:
        """One of agents/tools.py's tools; ToolError when it refused."""
        return self._use(problem, client, tool, args, functools.partial(toolbox_work, tool, args))

    def guidance(self, problem: str, client: str) -> Done:
        return self._use(problem, client, "get_guidance", {}, guidance_work)

    def _use(self, problem: str, client: str, tool: str, args: dict[str, Any], work: Callable[[Lane], Done]) -> Done:
        lane = self.lane(problem, client)
        with lane.lock:
            host = lane.host
            record_call(host, tool, args)
            try:
                done = work(lane)
            except Exception as exc:  # a broken history or a kerneltui bug is the tool's error, never the server's end
                done = Done(f"{tool} failed inside kerneltui: {type(exc).__name__}: {exc}", False)
                host.record("error", done.text)
            record_result(host, tool, done.text, done.ok, done.judged if tool == "write_version" else None)
            if done.ok and tool != "get_guidance" and waiting_feedback(host):
                done.text += "\n\n[the person has sent guidance or a verdict since you last asked: call get_guidance]"
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
        known = sorted(p.name for p in self.workspace.problems())
        if problem not in known:  # also refuses names that would lead out of the workspace
            raise ToolError(f"no problem {problem!r} in {self.workspace.root} (problems: {', '.join(known) or 'none'})")
        from kerneltui.core.agent_host import StoreHost, problem_info

        info = problem_info(self.workspace, problem, self.context)
        store = Store.open(self.workspace.db_path, check=False).store
        if self.joined is not None and self.joined[1] == problem:
            session_id, owned = self.joined[0], False
        else:
            session_id, owned = store.start_agent_session(problem, BACKEND, client, os.getpid()), True
        host = StoreHost(self.workspace, info, store, session_id, self.enqueue)
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
                if lane.owned:
                    lane.host.record("stop", reason, versions=lane.host.versions_written)
                    lane.host.store.update_agent_session(lane.host.session_id, ended=now(), stop_reason=reason)
                lane.host.store.close()
            finally:
                lane.lock.release()


def toolbox_work(tool: str, args: dict[str, Any], lane: Lane) -> Done:
    text, ok = lane.toolbox.call(tool, args)
    judged = None
    if ok and tool == "write_version":
        judged = lane.toolbox.written[-1]
    elif ok and tool == "read_results":
        judged = lane.host.results(str(args["version"]).strip())
    return Done(text, ok, judged)


def guidance_work(lane: Lane) -> Done:
    items = lane.host.feedback()
    if not items:
        return Done("nothing new from the person since the last call", True)
    text = render_feedback(items)
    lane.host.record("feedback", text, count=len(items))
    return Done(text, True, feedback=items)


def waiting_feedback(host: "StoreHost") -> bool:
    """Guidance or verdicts get_guidance would deliver: an MCP agent learns of them only by asking."""
    return host.store.feedback_waiting(host.problem.name, host.last_verdict)


# --- the MCP server -----------------------------------------------------------------------------

PROBLEM = "the problem: its folder's name in the workspace, e.g. 'softmax'"


def description(tool: str) -> str:
    return f"{TOOLS_BY_NAME[tool].description} Every tool takes `problem`, the problem's folder name in the workspace."


def tool_error(message: str) -> NoReturn:
    from mcp.server.mcpserver.exceptions import ToolError as McpToolError

    raise McpToolError(message)


async def offload(fn: Callable[..., T], *args: Any) -> T:
    """Runs blocking work (a judge can take minutes) in a worker thread; refusals become tool errors.

    A cancelled call abandons its thread, which finishes on its own (a write still records its verdict).
    """
    import anyio.to_thread

    try:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args), abandon_on_cancel=True)
    except (ToolError, WorkspaceError) as exc:
        tool_error(str(exc))
    except Exception as exc:  # e.g. the history cannot be opened: the agent reads why; the server goes on
        tool_error(f"kerneltui failed: {type(exc).__name__}: {exc}")


def answer(text: str, data: Mapping[str, Any]) -> "CallToolResult":
    """Readable text for the model, and the result as structured content for the client."""
    from mcp_types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=dict(data))


def client_name(request_context: Any) -> str:
    """The name the client gave in `initialize` (e.g. claude-code), which becomes the session's model."""
    params = request_context.session.client_params
    info = params.client_info if params is not None else None
    return str(info.name) if info is not None and info.name else UNNAMED_CLIENT


def build_server(ladder: Ladder) -> "MCPServer[Any]":
    from mcp.server.mcpserver import MCPServer

    problems = ", ".join(p.name for p in ladder.workspace.problems()) or "none yet"
    server: MCPServer[Any] = MCPServer(
        "kerneltui",
        instructions=(
            f"kerneltui's verification ladder for the GPU kernel problems in {ladder.workspace.root} "
            f"(problems: {problems}). Write each version with write_version: it returns the verdict rung by "
            "rung (load, compile, correctness, benchmark, roofline, dumps). Call get_guidance between versions "
            "for what the person watching says."
        ),
        log_level="WARNING",
    )
    add_version_tools(server, ladder)
    return server


def add_version_tools(server: "MCPServer[Any]", ladder: Ladder) -> None:
    """The toolbox's tools, made from their one definition (agents.tools.TOOLS), and get_guidance."""
    from mcp.server.mcpserver import Context
    from mcp_types import CallToolResult
    from pydantic import Field

    Problem = Annotated[str, Field(description=PROBLEM)]
    for tool in TOOLS:
        add_toolbox_tool(server, ladder, tool)

    @server.tool(
        description=(
            "Guidance and verdicts (approved/rejected, with a reason) the person gave since the last call; "
            "guidance is marked delivered, so each item comes once. Takes `problem`."
        )
    )
    async def get_guidance(problem: Problem, ctx: Context) -> Annotated[CallToolResult, Guidance]:
        done = await offload(ladder.guidance, problem, client_name(ctx.request_context))
        items = [item_of(f) for f in done.feedback]
        return answer(done.text, Guidance(problem=problem, items=items, text=done.text))


def add_toolbox_tool(server: "MCPServer[Any]", ladder: Ladder, tool: ToolSpec) -> None:
    """One toolbox tool as an MCP tool: `problem`, then the tool's own arguments, as its model defines them."""
    import inspect

    from mcp.server.mcpserver import Context
    from mcp_types import CallToolResult, ToolAnnotations
    from pydantic import Field

    output, shape = RESULTS[tool.name]

    async def call(problem: str, ctx: Context, **args: Any) -> CallToolResult:
        done = await offload(ladder.call, problem, client_name(ctx.request_context), tool.name, args)
        return answer(done.text, shape(problem, done, args))

    keyword, annotated = inspect.Parameter.KEYWORD_ONLY, cast(Any, Annotated)
    params = [
        inspect.Parameter("problem", keyword, annotation=Annotated[str, Field(description=PROBLEM)]),
        inspect.Parameter("ctx", keyword, annotation=Context),
    ]
    for name, spec in tool.args.model_fields.items():
        parts = (spec.annotation, *spec.metadata, Field(description=spec.description))
        annotation = annotated[parts]  # the field as a parameter: its type, its bounds, its description
        default = inspect.Parameter.empty if spec.is_required() else spec.default
        params.append(inspect.Parameter(name, keyword, annotation=annotation, default=default))
    returns = Annotated[CallToolResult, output]
    call.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
    call.__name__ = tool.name
    hints = ToolAnnotations(read_only_hint=True) if tool.read_only else None
    server.add_tool(call, name=tool.name, description=description(tool.name), annotations=hints)


def _judged(problem: str, done: Any, args: dict[str, Any]) -> Verdict:
    assert done.judged is not None  # the toolbox judged what it wrote, or found what was asked for
    return verdict_of(problem, done.judged)


# What each toolbox tool answers with, as structured content beside its text.
RESULTS: dict[str, tuple[type, Callable[[str, Any, dict[str, Any]], Mapping[str, Any]]]] = {
    "write_version": (Verdict, _judged),
    "read_results": (Verdict, _judged),
    "read_file": (FileText, lambda problem, done, args: FileText(problem=problem, path=args["path"], text=done.text)),
    "search_context": (
        SearchHits,
        lambda problem, done, args: SearchHits(problem=problem, query=args["query"], text=done.text),
    ),
    "read_dump": (
        DumpText,
        lambda problem, done, args: DumpText(
            problem=problem, version=args["version"], kind=args["kind"], text=done.text
        ),
    ),
}


# --- the command --------------------------------------------------------------------------------


def note(event: "SchedulerEvent") -> None:
    """The scheduler's news, on stderr: stdout carries MCP messages only."""
    if event.kind == "deferred":
        print(
            f"note: kerneltui pid {event.data.get('pid')} judges this workspace; its results are used", file=sys.stderr
        )
    elif event.kind == "warning":
        print(f"warning: {event.data.get('message')}", file=sys.stderr)


def joined_session(workspace: Workspace, session_id: int | None) -> tuple[int, str] | None:
    """(id, problem) of the agent session named by --session, which must exist."""
    if session_id is None:
        return None
    store = Store.open(workspace.db_path, check=False).store
    try:
        session = store.agent_session(session_id)
    finally:
        store.close()
    if session is None:
        raise WorkspaceError(f"no agent session {session_id} in {workspace.db_path}")
    return session_id, str(session["problem"])


def stop_now(ladder: Ladder, signum: int, frame: Any) -> None:
    """SIGTERM (how MCP clients stop a server slow to exit on EOF) or Ctrl-C: end the sessions, then the process.

    Unwinding instead would hang: the transport's stdin reader is a thread blocked in read(), which the
    event loop waits for. The judges die with this process (PDEATHSIG); a version they were judging is
    judged again by the next kerneltui on this workspace.
    """
    if not ladder.closed:
        ladder.close(f"the MCP server was stopped ({signal.Signals(signum).name})")
    os._exit(128 + signum)


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serves MCP on stdin/stdout until the client closes stdin; judges here unless another kerneltui does."""
    from kerneltui.core.agent_host import find_context
    from kerneltui.core.config import load
    from kerneltui.core.scheduler import start_headless

    workspace = resolve(args.workspace)
    config = load(args.config)
    joined = joined_session(workspace, args.session)
    scheduler = start_headless(workspace, config, note)
    ladder = Ladder(workspace, find_context(workspace, config.agent.context), scheduler.enqueue, joined)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, functools.partial(stop_now, ladder))
    try:
        build_server(ladder).run("stdio")  # returns when the client closes stdin
    finally:
        ladder.close("the MCP client disconnected")
        scheduler.stop()
    return EXIT_OK


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", help="the folder of problem folders (default: ., else ./kernels)")
    parser.add_argument("--config", help="a config file (default: $XDG_CONFIG_HOME/kerneltui/config.toml)")
    parser.add_argument(
        "--session",
        type=int,
        help="record into this agent session (one the process driving the agent started) instead of a new one",
    )
    parser.set_defaults(func=cmd_mcp)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """`kerneltui mcp`, for cli.py's subcommands."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "mcp", help="serve the ladder to any coding agent over MCP (stdio)"
    )
    add_arguments(parser)
    return parser
