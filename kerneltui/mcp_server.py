"""`kerneltui mcp`: the verification ladder as an MCP server over stdio, for any coding agent.

The tools are the built-in agents' (agents/tools.py), each taking the problem's name too, plus
get_guidance: write_version writes the next vNNN.py, waits for the ladder and returns its verdict
rung by rung, as structured content and as text. This module only speaks MCP: the work is the
headless Session's (kerneltui.core.session, and kerneltui.core.agents.external for the agent sessions).
Versions are judged by the Session's scheduler, or by the kerneltui already judging the workspace
(its watcher sees the file; the verdict comes through the history either way). Every call and its
result is an event of an agent session per problem (backend "mcp", model: the client's name), so the
dashboard's Agent pane shows what the external agent did. stdout is the MCP channel: notes go to stderr.

The MCP SDK (and pydantic, and the judges' machinery) is imported only when the server starts: the
command's options are kerneltui.cli.mcp's, and importing the SDK takes most of a second. That is why this
module does without `from __future__ import annotations`: the tools are closures whose annotations
name types imported inside a function, and the SDK reads those annotations as objects.
"""

import argparse
import functools
import os
import signal
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn, TypeVar, cast

from typing_extensions import TypedDict  # pydantic needs it below Python 3.12 for nested TypedDicts

from agents.base import Feedback
from agents.tools import TOOLS, TOOLS_BY_NAME, ToolError, ToolSpec
from agents.verdict import Verdict
from kerneltui.core.workspace import WorkspaceError, resolve

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp_types import CallToolResult

    from kerneltui.core.agents.external import ToolOutcome
    from kerneltui.core.session import Session, SessionEvent

EXIT_OK = 0
UNNAMED_CLIENT = "mcp client"
MAX_CLIENT_NAME = 80
T = TypeVar("T")

# --- what the tools return, as structured content -------------------------------------------------
# TypedDicts, not pydantic models: the SDK derives the output schemas from either, and these cost
# nothing to import. A verdict's shape is agents.verdict.Verdict (Judged.to_json()), shared with the agents.


class FileText(TypedDict):
    """A window of a file: numbered lines, with a note of how to read on when it was cut."""

    problem: str
    path: str
    text: str


class SearchHits(TypedDict):
    """The context index's hits as path:start-end, each with its matching lines as path:line: text, the chunks
    holding most of the words first (a plain word match over files where SQLite lacks FTS5)."""

    problem: str
    query: str
    text: str


class DumpText(TypedDict):
    """A window (or the grep) of a version's compiled code."""

    problem: str
    version: str
    kind: str
    text: str


class ProfileText(TypedDict):
    """A version's Nsight Compute profile (each kernel's figures), or its verdict under compute-sanitizer; or why
    there is none."""

    problem: str
    version: str
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


def progress_sender(ctx: Any) -> Callable[[float, str], None]:
    """Progress notifications from the thread that waits for a verdict (when the client asked for them with a
    progress token): a client that resets its timeout on progress keeps waiting while the rungs land."""
    import anyio.from_thread

    def send(done: float, message: str) -> None:
        try:
            anyio.from_thread.run(functools.partial(ctx.report_progress, done, None, message))
        except Exception:  # the call was cancelled or the client is gone: the verdict is recorded anyway
            pass

    return send


def answer(text: str, data: Mapping[str, Any]) -> "CallToolResult":
    """Readable text for the model, and the result as structured content for the client."""
    from mcp_types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=dict(data))


def client_name(request_context: Any) -> str:
    """The name the client gave in `initialize` (e.g. claude-code), which becomes the session's model and every
    version's author: stored printable and short, as any text from an agent is shown."""
    from harness.contract.text import printable

    params = request_context.session.client_params
    info = params.client_info if params is not None else None
    name = printable(str(info.name)[:MAX_CLIENT_NAME]).strip() if info is not None and info.name else ""
    return name or UNNAMED_CLIENT


def kerneltui_version() -> str:
    """The installed package's version, which MCP clients show beside the server's name."""
    from importlib import metadata

    try:
        return metadata.version("kerneltui")
    except metadata.PackageNotFoundError:
        return "unknown"


class Scope:
    """The problems a server acts for: those it was started for (--problem, the joined agent session's), or every
    problem of the workspace when it was started for none. A call naming another problem is refused before it
    opens anything of it (guidance, versions, results, files)."""

    def __init__(self, problems: frozenset[str] = frozenset()) -> None:
        self.problems = problems

    def check(self, problem: str) -> None:
        if self.problems and problem not in self.problems:
            named = ", ".join(sorted(self.problems))
            tool_error(f"this kerneltui MCP server acts for {named} only: {problem!r} is not its problem")

    def shown(self, names: list[str]) -> list[str]:
        return [name for name in names if not self.problems or name in self.problems]


def build_server(session: "Session", scope: Scope | None = None) -> "MCPServer[Any]":
    """The MCP server over `session`, whose tool calls do the work, for the problems of `scope`."""
    from mcp.server.mcpserver import MCPServer

    scope = scope or Scope()
    hidden = {path.name for path in session.external.hidden}  # other agents' copies, in a bench
    names = scope.shown([p.name for p in session.workspace.problems() if p.name not in hidden])
    problems = ", ".join(names) or "none yet"
    server: MCPServer[Any] = MCPServer(
        "kerneltui",
        version=kerneltui_version(),
        instructions=(
            f"kerneltui's verification ladder for the GPU kernel problems in {session.workspace.root} "
            f"(problems: {problems}). Write each version with write_version: it returns the verdict rung by "
            "rung (load, compile, correctness, benchmark, roofline, dumps). Call get_guidance between versions "
            "for what the person watching says."
        ),
        log_level="WARNING",
    )
    add_version_tools(server, session, scope)
    return server


def add_version_tools(server: "MCPServer[Any]", session: "Session", scope: Scope) -> None:
    """The toolbox's tools, made from their one definition (agents.tools.TOOLS), and get_guidance."""
    from mcp.server.mcpserver import Context
    from mcp_types import CallToolResult
    from pydantic import Field

    Problem = Annotated[str, Field(description=PROBLEM)]
    for tool in TOOLS:
        add_toolbox_tool(server, session, tool, scope)

    @server.tool(
        description=(
            "Guidance and verdicts (approved/rejected, with a reason) the person gave since the last call; "
            "guidance is marked delivered, so each item comes once. Takes `problem`."
        )
    )
    async def get_guidance(problem: Problem, ctx: Context) -> Annotated[CallToolResult, Guidance]:
        scope.check(problem)
        done = await offload(session.guidance_for, problem, client_name(ctx.request_context))
        items = [item_of(f) for f in done.feedback]
        return answer(done.text, Guidance(problem=problem, items=items, text=done.text))


def add_toolbox_tool(server: "MCPServer[Any]", session: "Session", tool: ToolSpec, scope: Scope) -> None:
    """One toolbox tool as an MCP tool: `problem`, then the tool's own arguments, as its model defines them."""
    import inspect

    from mcp.server.mcpserver import Context
    from mcp_types import CallToolResult, ToolAnnotations
    from pydantic import Field

    output, shape = RESULTS[tool.name]

    async def call(problem: str, ctx: Context, **args: Any) -> CallToolResult:
        scope.check(problem)
        client = client_name(ctx.request_context)
        done = await offload(session.tool_call, problem, client, tool.name, args, progress_sender(ctx))
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


def _judged(problem: str, done: "ToolOutcome", args: dict[str, Any]) -> Verdict:
    assert done.judged is not None  # the toolbox judged what it wrote, or found what was asked for
    return done.judged.to_json()


Shape = Callable[[str, "ToolOutcome", dict[str, Any]], Mapping[str, Any]]

# What each toolbox tool answers with, as structured content beside its text.
RESULTS: dict[str, tuple[type, Shape]] = {
    "write_version": (Verdict, _judged),
    "read_results": (Verdict, _judged),
    "wait_for_verdict": (Verdict, _judged),
    "read_file": (FileText, lambda problem, done, args: FileText(problem=problem, path=args["path"], text=done.text)),
    "search_context": (
        SearchHits,
        lambda problem, done, args: SearchHits(problem=problem, query=args["query"], text=done.text),
    ),
    "sanitize": (
        ProfileText,
        lambda problem, done, args: ProfileText(problem=problem, version=args["version"], text=done.text),
    ),
    "profile": (
        ProfileText,
        lambda problem, done, args: ProfileText(problem=problem, version=args["version"], text=done.text),
    ),
    "read_dump": (
        DumpText,
        lambda problem, done, args: DumpText(
            problem=problem, version=args["version"], kind=args["kind"], text=done.text
        ),
    ),
}


# --- the command --------------------------------------------------------------------------------


def note(event: "SessionEvent") -> None:
    """The scheduler's news, on stderr: stdout carries MCP messages only."""
    from kerneltui.core.judging.events import SchedulerEvent

    if not isinstance(event, SchedulerEvent):
        return  # the rest is about the dashboard's verdicts, guidance and agents, none of which happen here
    if event.kind == "deferred":
        print(
            f"note: kerneltui pid {event.data.get('pid')} judges this workspace; its results are used", file=sys.stderr
        )
    elif event.kind == "warning":
        print(f"warning: {event.data.get('message')}", file=sys.stderr)


def stop_now(session: "Session", signum: int, frame: Any) -> None:
    """SIGTERM (how MCP clients stop a server slow to exit on EOF) or Ctrl-C: end the sessions, then the process.

    Unwinding instead would hang: the transport's stdin reader is a thread blocked in read(), which the
    event loop waits for. Only the agent sessions are ended, not the scheduler (stopping it joins its
    thread, for seconds, in a signal handler): the judges die with this process (PDEATHSIG), and a
    version they were judging is judged again by the next kerneltui on this workspace.
    """
    session.end_external(f"the MCP server was stopped ({signal.Signals(signum).name})")  # once: a no-op if closing
    os._exit(128 + signum)


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serves MCP on stdin/stdout until the client closes stdin; judges here unless another kerneltui does."""
    from kerneltui.core.config import load
    from kerneltui.core.session import Session

    workspace = resolve(args.workspace)
    config = load(args.config)
    session = Session(workspace, config, on_event=note)
    if args.session is not None:
        session.join_agent_session(args.session)  # before judging starts: a wrong id ends the command at once
    session.external.hidden = tuple(workspace.root / name for name in args.hide or ())
    joined = session.external.joined
    scope = Scope(frozenset(args.problem or ()) | ({joined[1]} if joined else set()))
    session.start_scheduler(wait_s=120)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, functools.partial(stop_now, session))
    try:
        build_server(session, scope).run("stdio")  # returns when the client closes stdin
    finally:
        session.close("the MCP client disconnected")
    return EXIT_OK
