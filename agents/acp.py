"""External agents (Claude Code, Codex, Gemini CLI, OpenCode...) driven over the Agent Client Protocol.

kerneltui is the ACP client: it starts the agent's command with the problem folder as its cwd,
opens a session handing it kerneltui's MCP server (so it writes versions through the ladder and
gets verdicts as data), and prompts it with the task. What the agent streams (messages, thoughts,
plans, tool calls) goes to the transcript. Between turns, the person's guidance and verdicts and
the results of new evaluations become the next prompt; guidance that arrives mid-turn waits for
the turn to end, unless the person interrupts it (session/cancel). Permission requests go to the
person (or a fixed policy, headless). The agent's file-system calls are confined: reads to the
workspace and the context folder, writes to versions and scratch in its own problem's folder.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import shlex
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.base import Budget, Feedback, Host, Judged, best_roofline, go_on, render_feedback, spent_reason
from agents.known import known_for
from agents.prompt import task_prompt
from agents.tools import ToolError, confine, confine_write
from harness.contract.text import printable

IDLE_BEFORE_WAITING_S = 5.0  # a version written just before the turn ended may not be queued yet
POLL_S = 0.2
QUIET_S = 0.6  # streamed text with no new piece for this long goes to the transcript (it is shown live)
MAX_FILE_CHARS = 2_000_000
MAX_NAME = 80  # the name and version an agent gives itself, kept as its session's model


@dataclass
class PermissionAsk:
    """A permission request waiting for the person: answer(option_id) or answer(None) to deny."""

    title: str
    options: list[tuple[str, str, str]]  # (option_id, name, kind)
    answer: Callable[[str | None], None]

    def option_for(self, kinds: tuple[str, ...]) -> str | None:
        return next((oid for oid, _, kind in self.options if kind in kinds), None)


def acp_prompt(problem_text: str, problem: str, folder: Path) -> str:
    return (
        f"{problem_text}\n"
        f"You work in the problem folder {folder}. Write each version with the `write_version` tool of the "
        f'`kerneltui` MCP server (problem="{problem}"): it writes the next vNNN.py and returns the ladder\'s '
        "verdict. Its other tools (read_results, read_dump, profile, sanitize, search_context, read_file, "
        "get_guidance) take "
        "problem too. If you write a vNNN.py yourself, kerneltui judges it and sends you the result. Do not "
        "edit problem.py or earlier versions: every version is kept and compared."
    )


def results_text(judged: list[Judged]) -> str:
    lines = ["Results of versions judged since your last turn:"]
    for item in judged:
        lines.append(item.summary.strip())
    return "\n\n".join(lines)


@dataclass
class AcpAgent:
    command: list[str]
    mcp_command: list[str] | None = None  # kerneltui's MCP server, handed to the agent in session/new
    permissions: str = "ask"  # ask (through `asker`), allow, deny
    asker: Callable[[PermissionAsk], None] | None = None  # shows a request to the person (any thread)
    log: Path | None = None  # the agent's stderr
    name: str = ""
    startup_timeout_s: float = 180.0  # initialize, authenticate and session/new answered within this
    silence_timeout_s: float = 600.0  # a turn with nothing from the agent this long (judging aside) ends
    heartbeat_s: float = 30.0  # a silent turn says so this often
    backend: str = "acp"
    model: str = field(init=False)

    def __post_init__(self) -> None:
        self.model = self.name or Path(self.command[0]).name
        self._cancel = threading.Event()
        self._interrupt = threading.Event()
        self.busy = False  # a prompt turn is running
        self.log_start = 0  # where this run's stderr begins in the log

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def stderr_tail(self) -> str:
        return said_on_stderr(self.log, self.log_start)

    def interrupt(self) -> None:
        """Ends the running turn (session/cancel); what waits for it is sent at once."""
        self._interrupt.set()

    def run(self, host: Host, budget: Budget) -> str:
        try:
            return asyncio.run(self._run(host, budget))
        except FileNotFoundError as exc:
            reason = f"cannot start {shlex.join(self.command)}: {exc.strerror}"
        except AcpAuthNeeded as exc:
            reason = str(exc)
        except asyncio.CancelledError:  # its turn cancelled while stopping: a BaseException, not an error
            reason = "stopped by the person" if self._cancel.is_set() else "the ACP session was cancelled"
        except TimeoutError:
            reason = f"the agent did not start within {self.startup_timeout_s:.0f} s (startup_timeout_s)"
        except Exception as exc:
            if self._cancel.is_set() or host.stop_requested():  # the connection closed because we stopped it
                reason = "stopped by the person"
            else:
                reason = f"the ACP connection failed: {error_text(exc)}"
                reason += login_help(self.command, reason) + self.stderr_tail()
        if reason != "stopped by the person":
            host.record("error", reason)
        host.record("stop", reason)
        return reason

    async def _run(self, host: Host, budget: Budget) -> str:
        from acp import spawn_agent_process, text_block

        client: Any = _Client(self, host)  # a structural acp.Client: the methods an agent calls
        log = open(self.log, "ab") if self.log else None  # noqa: SIM115  (open for the process's life)
        self.log_start = log.tell() if log else 0
        stderr = log.fileno() if log else asyncio.subprocess.DEVNULL
        folder = host.problem.folder
        host.record("start", f"{shlex.join(self.command)} on {host.problem.name}", model=self.model, backend="acp")
        ended: str | None = None  # why the conversation ended, kept should the teardown fail after it
        try:
            if shutil.which(self.command[0]) is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), self.command[0])
            async with spawn_agent_process(
                client,
                sys.executable,
                "-P",  # the cwd (the problem folder, the agent's to write) is not put on sys.path
                "-m",
                "agents.reaper",  # the agent's whole process tree ends with the session
                *self.command,
                cwd=folder,
                env=agent_env(self.command, host),
                transport_kwargs={"stderr": stderr},
            ) as (conn, _process):
                start = self._start_session(conn, host, folder)
                client.session_id = await asyncio.wait_for(start, self.startup_timeout_s)
                first = acp_prompt(task_prompt(host.problem), host.problem.name, folder)
                feedback = host.feedback()
                if feedback:
                    host.record("feedback", render_feedback(feedback), count=len(feedback))
                    first += "\n\nBefore you start, the person says:\n" + render_feedback(feedback)
                ended = await self._converse(conn, client, host, budget, first, text_block)
                return ended
        except ProcessLookupError:
            if ended is None:
                raise
            return ended  # the agent's process was gone before the session's teardown signalled it
        finally:
            if log:
                log.close()

    async def _start_session(self, conn: Any, host: Host, folder: Path) -> str:
        """initialize, authenticate when the agent asks (with a key it names from the environment), session/new."""
        from acp import PROTOCOL_VERSION
        from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

        init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=False
            ),
            client_info=Implementation(name="kerneltui", title="kerneltui", version="0.1"),
        )
        info = init.agent_info
        if info is not None:  # the agent's own words, stored as the session's model: printable and short
            self.model = printable(f"{info.name} {info.version}"[:MAX_NAME]).strip() or self.model
        methods = list(init.auth_methods or [])
        chosen = auth_method(methods, dict(os.environ))
        if chosen is not None:
            await conn.authenticate(method_id=chosen.id)
            host.record("auth", f"authenticated: {chosen.name}")
        try:
            session = await conn.new_session(cwd=str(folder), mcp_servers=self._mcp_servers(host))
        except Exception as exc:
            if methods and "auth" in str(exc).lower():
                raise AcpAuthNeeded(login_hint(methods)) from None
            raise
        return str(session.session_id)

    def _mcp_servers(self, host: Host) -> list[Any]:
        """kerneltui's MCP server, recording into this session (so the transcript is one)."""
        from acp.schema import EnvVariable, McpServerStdio

        if not self.mcp_command:
            return []
        session = getattr(host, "session_id", None)
        args = self.mcp_command[1:] + (["--session", str(session)] if session is not None else [])
        env = [EnvVariable(name=k, value=v) for k, v in sorted(mcp_env().items())]
        return [McpServerStdio(name="kerneltui", command=self.mcp_command[0], args=args, env=env)]

    async def _converse(self, conn: Any, client: _Client, host: Host, budget: Budget, prompt: str, block: Any) -> str:
        """Prompt, wait for the turn (or interrupt it), then wait for something to say; until a stop."""
        session_id = client.session_id
        judged: list[Judged] = []
        turns = 0
        while True:
            turns += 1
            host.record("prompt", prompt, turn=turns)
            turn = asyncio.ensure_future(conn.prompt(session_id=session_id, prompt=[block(prompt)]))
            self.busy = True
            stop = await self._wait_turn(turn, conn, session_id, host, client)
            self.busy = False
            client.flush()
            if turn.done() and not turn.cancelled() and turn.exception() is None:
                host.record(
                    "turn",
                    f"turn {turns}: {turn.result().stop_reason}",
                    turn=turns,
                    stop_reason=turn.result().stop_reason,
                )
            elif turn.done() and not turn.cancelled() and turn.exception() is not None:
                if self._cancel.is_set() or host.stop_requested():  # its connection closed as we stopped it
                    return self._stopped(host, "stopped by the person")
                reason = f"the agent's turn failed: {error_text(turn.exception())}"
                reason += login_help(self.command, reason) + self.stderr_tail()
                host.record("error", reason)
                return self._stopped(host, reason)
            if stop:
                return self._stopped(host, stop)
            prompt, stop, budget = await self._next_prompt(host, budget, judged)
            if stop:
                return self._stopped(host, stop)

    async def _wait_turn(
        self, turn: asyncio.Future[Any], conn: Any, session_id: str, host: Host, client: _Client
    ) -> str | None:
        client.last_heard = time.monotonic()
        told = 0  # heartbeats said in this silence
        while not turn.done():
            client.flush_if_quiet()
            if self._cancel.is_set() or host.stop_requested():
                await self._cancel_turn(conn, session_id, turn)
                return "stopped by the person"
            if self._interrupt.is_set():
                self._interrupt.clear()
                host.record("interrupt", "the person interrupted the turn")
                await self._cancel_turn(conn, session_id, turn)
                return None
            if host.judging() or client.asking:  # waiting on kerneltui or the person is not silence
                client.last_heard = time.monotonic()
            silent = time.monotonic() - client.last_heard
            every = min(self.heartbeat_s, self.silence_timeout_s / 3)  # said at least twice before the end
            if silent > self.silence_timeout_s:
                await self._cancel_turn(conn, session_id, turn)
                return f"the agent said nothing for {silent:.0f} s (silence_timeout_s){self.stderr_tail()}"
            if silent < every:
                told = 0
            elif silent >= every * (told + 1):
                told += 1
                latest = said_on_stderr(self.log, self.log_start, 1, header=False).strip()
                said = f"the agent has said nothing for {silent:.0f} s" + (f"; its stderr: {latest}" if latest else "")
                host.record("silent", said, seconds=round(silent))
            await asyncio.sleep(POLL_S)
        return None

    async def _cancel_turn(self, conn: Any, session_id: str, turn: asyncio.Future[Any]) -> None:
        try:
            await conn.cancel(session_id=session_id)
            await asyncio.wait_for(asyncio.shield(turn), timeout=10)
        except Exception:
            turn.cancel()

    async def _next_prompt(self, host: Host, budget: Budget, judged: list[Judged]) -> tuple[str, str | None, Budget]:
        """Waits until there are results or words from the person to send; or a reason to stop. When the agent
        ended its turn with nothing left to judge, it says once that it waits for the person. A spent budget
        pauses it here until the person grants more (the budget it goes on with, returned) or stops it."""
        idle_since: float | None = None
        while True:
            new = host.finished()
            judged += new
            versions, best = host.session_versions(), best_roofline(judged)
            if spent_reason(budget, versions, 0.0):  # it pauses: waited for off the event loop
                budget, reason = await asyncio.to_thread(go_on, host, budget, versions, 0.0, best)
            else:
                budget, reason = go_on(host, budget, versions, 0.0, best)
            if reason:
                return "", reason, budget
            if self._cancel.is_set() or host.stop_requested():
                return "", "stopped by the person", budget
            # Taken only now: guidance taken is marked delivered, so it must reach an agent that goes on.
            feedback: list[Feedback] = host.feedback()
            parts = [results_text(new)] if new else []
            if feedback:
                host.record("feedback", render_feedback(feedback), count=len(feedback))
                parts.append("The person says:\n" + render_feedback(feedback))
            if parts:
                return "\n\n".join(parts), None, budget
            if host.judging():
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif idle_since > 0 and time.monotonic() - idle_since > IDLE_BEFORE_WAITING_S:
                idle_since = -1.0  # said once
                host.record(
                    "waiting",
                    f"the agent ended its turn with no version left to judge; it waits for guidance "
                    f"(kerneltui guide {host.problem.name} TEXT) or a stop",
                )
            await asyncio.sleep(POLL_S)

    def _stopped(self, host: Host, reason: str) -> str:
        host.record("stop", reason)
        return reason


class _Client:
    """The ACP client side: session updates into the transcript, permissions, confined files."""

    def __init__(self, agent: AcpAgent, host: Host) -> None:
        self.agent, self.host = agent, host
        self.session_id = ""
        self.buffer: dict[str, list[str]] = {"text": [], "thought": []}
        self.titles: dict[str, str] = {}
        self.quiet: set[str] = set()
        self.last_piece = 0.0
        self.last_heard = time.monotonic()  # the agent's last message, update or request
        self.asking = False  # a permission request waits for the person
        self.loop: asyncio.AbstractEventLoop | None = None

    def flush_if_quiet(self) -> None:
        if any(self.buffer.values()) and time.monotonic() - self.last_piece > QUIET_S:
            self.flush()

    def flush(self) -> None:
        for kind, parts in self.buffer.items():
            text = "".join(parts).strip()
            if text:
                self.host.record(kind, text)
            parts.clear()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.last_heard = time.monotonic()
        kind = getattr(update, "session_update", "")
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            target = "text" if kind == "agent_message_chunk" else "thought"
            other = "thought" if target == "text" else "text"
            if self.buffer[other]:
                self.flush()
            self.buffer[target].append(getattr(update.content, "text", ""))
            self.last_piece = time.monotonic()
            return
        self.flush()
        if kind == "plan":
            entries = [{"content": e.content, "status": e.status, "priority": e.priority} for e in update.entries]
            self.host.record("plan", "; ".join(e["content"] for e in entries), entries=entries)
        elif kind == "tool_call" and is_ours(update.title):
            self.quiet.add(update.tool_call_id)  # kerneltui's own MCP server records these, with the verdicts
        elif kind == "tool_call":
            self.titles[update.tool_call_id] = update.title
            self.host.record(
                "tool_call", update.title, tool=update.kind or "other", id=update.tool_call_id, status=update.status
            )
        elif kind == "tool_call_update" and update.status in ("completed", "failed") and not self.quiet_call(update):
            title = update.title or self.titles.get(update.tool_call_id, update.tool_call_id)
            text = tool_output(update) or title
            self.host.record(
                "tool_result", text, tool=update.kind or "other", ok=update.status == "completed", title=title
            )

    def quiet_call(self, update: Any) -> bool:
        return update.tool_call_id in self.quiet or is_ours(update.title or "")

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        self.flush()
        title = tool_call.title or self.titles.get(tool_call.tool_call_id, "a tool call")
        choices = [(o.option_id, o.name, o.kind) for o in options]
        self.host.record("permission", title, options=[{"id": i, "name": n, "kind": k} for i, n, k in choices])
        self.asking = True
        try:
            chosen = await self._decide(title, choices)
        finally:
            self.asking, self.last_heard = False, time.monotonic()
        name = next((n for i, n, _ in choices if i == chosen), "denied")
        self.host.record("permission_answer", f"{title}: {name}", option=chosen)
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chosen))

    async def _decide(self, title: str, choices: list[tuple[str, str, str]]) -> str | None:
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[str | None] = loop.create_future()

        def settle(option: str | None) -> None:
            if not answered.done():
                answered.set_result(option)

        def answer(option: str | None) -> None:  # from any thread
            loop.call_soon_threadsafe(settle, option)

        ask = PermissionAsk(title, choices, answer)
        policy = self.agent.permissions
        if policy == "allow":
            return ask.option_for(("allow_once", "allow_always"))
        if policy == "deny" or self.agent.asker is None:
            return ask.option_for(("reject_once", "reject_always"))
        self.agent.asker(ask)
        while not answered.done():
            if self.agent.cancelled or self.host.stop_requested():
                return None
            await asyncio.sleep(POLL_S)
        return answered.result()

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> Any:
        from acp import RequestError
        from acp.schema import ReadTextFileResponse

        try:
            real = confine(path, self.host.problem.roots, self.host.problem.folder, self.host.problem.private)
            text = real.read_text(errors="replace")[:MAX_FILE_CHARS]
        except (ToolError, OSError) as exc:
            raise RequestError.invalid_params({"path": path, "reason": str(exc)}) from None
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max(0, (line or 1) - 1)
            text = "".join(lines[start : start + limit] if limit else lines[start:])
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        from acp import RequestError
        from acp.schema import WriteTextFileResponse

        try:  # writes: versions and scratch in its own problem's folder (the problem's files are the person's)
            real = confine_write(path, self.host.problem)
            real.parent.mkdir(parents=True, exist_ok=True)
            write_no_follow(real, content)
        except (ToolError, OSError) as exc:
            raise RequestError.invalid_params({"path": path, "reason": str(exc)}) from None
        self.host.record("file_write", str(real), bytes=len(content))
        return WriteTextFileResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        from acp import RequestError

        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def write_no_follow(path: Path, content: str) -> None:
    """Writes the file itself: a link put in its place after it was checked is refused, not followed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as out:
        out.write(content)


def tool_output(update: Any) -> str:
    """The text an ACP tool call produced, when it says any."""
    parts = []
    for item in update.content or []:
        text = getattr(getattr(item, "content", None), "text", None)
        if text:
            parts.append(str(text))
    if not parts and update.raw_output is not None:
        parts.append(str(update.raw_output))
    return "\n".join(parts).strip()


def is_ours(title: str) -> bool:
    """A call to kerneltui's MCP server (titles differ by agent: mcp__kerneltui__write_version...)."""
    return "kerneltui" in title.lower()


class AcpAuthNeeded(Exception):
    """The agent wants authentication kerneltui could not give it; the message says the agent's own ways in."""


def auth_method(methods: list[Any], environ: dict[str, str]) -> Any | None:
    """The method the environment can satisfy: an env-var method whose variables are all set, or a method whose
    id or name names a variable that is set (codex-acp's "Use OPENAI_API_KEY"); None when none is."""
    for method in methods:
        needed = [v.name for v in getattr(method, "vars", None) or [] if not getattr(v, "optional", False)]
        if needed and all(environ.get(name) for name in needed):
            return method
    for method in methods:
        named = re.findall(r"[A-Z][A-Z0-9_]*_(?:KEY|TOKEN)", f"{method.id} {method.name} {method.description or ''}")
        spelled = method.id.upper().replace("-", "_")
        if any(environ.get(name) for name in named) or (spelled.endswith("_KEY") and environ.get(spelled)):
            return method
    return None


def login_hint(methods: list[Any]) -> str:
    ways = "; ".join(f"{m.name}" + (f" ({m.description})" if m.description else "") for m in methods)
    return (
        f"the agent asks to authenticate and no API key it accepts is set: {ways}. Set the key in the environment "
        "kerneltui starts from, or log in with the agent's own command first"
    )


def error_text(exc: BaseException | None) -> str:
    """An error as the agent gave it: an ACP RequestError's message and its data (where agents put the cause,
    e.g. that the model's API could not be reached), which "Internal error" alone hid."""
    if exc is None:
        return "no error"
    detail = getattr(exc, "data", None)
    if isinstance(detail, dict):
        detail = "; ".join(f"{k}: {v}" for k, v in detail.items())
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text + (f" ({str(detail)[:600]})" if detail else "")


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
STACK_FRAME = re.compile(r"^\s+at |^\s*File \"|^\s*[{}\])]+[,;]?$")  # JS and Python frames, bare brackets


def said_on_stderr(log: Path | None, since: int = 0, lines: int = 6, header: bool = True) -> str:
    """The end of what the agent wrote on its stderr (kept in its log, from byte `since`: this run's), where
    agents say why they stopped: colour codes and stack frames left out, the words kept."""
    if log is None:
        return ""
    try:
        with open(log, "rb") as handle:
            handle.seek(max(since, handle.seek(0, os.SEEK_END) - 8192))
            tail = printable(ANSI.sub("", handle.read().decode(errors="replace")))
    except OSError:
        return ""
    kept = [line for line in tail.splitlines() if line.strip() and not STACK_FRAME.match(line)][-lines:]
    if not kept:
        return ""
    body = "\n".join(f"    {line.strip()[:300]}" for line in kept)
    return f"\n  its stderr ({log}):\n{body}" if header else body


def agent_env(command: list[str], host: Host) -> dict[str, str]:
    """The agent's environment: ours, plus what a known agent needs to work under kerneltui (agents.known),
    each said in the transcript: Gemini's workspace trust, without which it starts no MCP server; as root
    (GPU containers often are), the flag an agent that refuses root takes to run anyway."""
    env = dict(os.environ)
    agent = known_for(command)
    if agent is None:
        return env
    wanted = {**agent.env, **(agent.root_env if os.geteuid() == 0 else {})}
    added = {k: v for k, v in wanted.items() if env.get(k) != v}
    if added:
        env.update(added)
        flags = " ".join(f"{k}={v}" for k, v in added.items())
        why = " (running as root)" if any(k in agent.root_env for k in added) else ""
        host.record("warning", f"{flags} set for {agent.name}{why}: it needs it to work under kerneltui")
    return env


def login_help(command: list[str], failure: str) -> str:
    """How to get in, for a failure that says the agent has no credentials (the agents' own words vary)."""
    words = failure.lower()
    if not any(w in words for w in ("authentication required", "api key is missing", "not logged in", "unauthor")):
        return ""
    agent = known_for(command)
    if agent is None:
        return ""
    return f"\n  to log in: set {' or '.join(agent.keys)} in the environment kerneltui starts from, or {agent.login}"


def split_command(command: str) -> list[str]:
    words = shlex.split(command)
    if not words:
        raise ValueError("an empty agent command")
    return words


def mcp_command(
    workspace: Path, config: Path | None = None, hidden: tuple[Path, ...] = (), problem: str | None = None
) -> list[str]:
    """How an agent starts kerneltui's MCP server on this workspace, with the person's config; `hidden`: problem
    folders its tools may not open; `problem`: the one problem it acts for."""
    command = [sys.executable, "-m", "kerneltui", "mcp", "--workspace", str(workspace)]
    command += ["--problem", problem] if problem else []
    command += [arg for folder in hidden for arg in ("--hide", folder.name)]
    return command + (["--config", str(config)] if config else [])


# What the MCP server needs of kerneltui's environment, handed over explicitly: agents (Codex, the ACP SDK's
# clients) start their MCP servers with an environment of their own. No API key: the server judges, it calls
# no model.
MCP_ENV_NAMES = ("PATH", "HOME", "PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_HOME",
                 "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")  # fmt: skip
MCP_ENV_PREFIXES = ("KERNELTUI_", "TRITON_", "CUTE_DSL_")


def mcp_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    environ = dict(os.environ) if environ is None else environ
    return {k: v for k, v in environ.items() if k in MCP_ENV_NAMES or k.startswith(MCP_ENV_PREFIXES)}
