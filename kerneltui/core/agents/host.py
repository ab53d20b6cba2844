"""What an agent works through (agents.base.Host), over the history and the judges; and running one.

Versions an agent writes land in the problem folder whole (written aside, then hard-linked to the
next free vNNN.py, which never replaces another writer's file), with their author recorded, and are
queued at once; the host then waits for the ladder's
result in the history, so it works the same whether this process or another kerneltui judges.
Every transcript event is a row in agent_events, which the dashboard's Agent pane shows.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agents.acp import PermissionAsk
from agents.base import Agent, Budget, Feedback, Judged, ProblemInfo
from harness.contract import source
from harness.contract.report import profile_text, rung_line
from harness.contract.results import AskedKind, Flag
from kerneltui.core.config import AgentConfig
from kerneltui.core.locations import CHECKOUT
from kerneltui.core.workspace import VERSION_RE, Workspace
from kerneltui.history.agents import granted_text
from kerneltui.history.store import Store, now, parse_flags

FINAL = ("pass", "fail", "unverified", "error")
# What each kind asked of the judges is called in what the agent reads: (to do it, done, the work)
ASKED_WORDS: dict[str, tuple[str, str, str]] = {
    "profile": ("profile", "profiled", "profile"),
    "sanitize": ("run compute-sanitizer", "judged under compute-sanitizer", "run under compute-sanitizer"),
}
POLL_S = 0.2
HEARTBEAT_S = 10.0
GRANT_POLL_S = 0.5  # a paused agent looks for a grant this often (the history: a grant may come from any shell)
ERROR_CHARS = 2500
INPUT_TOKENS = ("input_tokens", "cache_write_tokens", "cache_read_tokens")
NUMBERING = threading.Lock()  # two agents in one process never take the same version number

Echo = Callable[[str, str, dict[str, Any]], None]


def find_context(workspace: Workspace, configured: str | None = None) -> Path | None:
    """The context folder: configured, $KERNELTUI_CONTEXT, <workspace>/context, else the one shipped."""
    shipped = CHECKOUT / "context"  # the checkout's context/, beside kerneltui/
    for candidate in (configured, os.environ.get("KERNELTUI_CONTEXT"), workspace.root / "context", shipped):
        if candidate and Path(candidate).expanduser().is_dir():
            return Path(candidate).expanduser().resolve()
    return None


def problem_info(workspace: Workspace, name: str, context: Path | None, hidden: tuple[Path, ...] = ()) -> ProblemInfo:
    """`hidden`: folders of the workspace this agent's tools may not open (other agents' copies in a bench)."""
    folder = workspace.problem_dir(name)
    source = (folder / "problem.py").read_text(errors="replace")
    private = (workspace.state.resolve(), *(h.resolve() for h in hidden))
    return ProblemInfo(name, folder.resolve(), workspace.root.resolve(), context, source, private=private)


def with_notes(code: str, notes: str) -> str:
    """The module as written; notes become its docstring when it has none (the docstring is the note)."""
    try:
        has_doc = ast.get_docstring(ast.parse(code)) is not None
    except SyntaxError:
        has_doc = False
    if has_doc or not notes.strip():
        return code
    printable = "".join(ch for ch in notes if ch in "\n\t" or ch.isprintable())  # a NUL made the file unloadable
    safe = printable.strip().replace("\\", "\\\\").replace('"""', "'''")  # a docstring the notes cannot end early
    pad = " " if safe.endswith('"') else ""  # a closing quote would run into the three that end it
    return f'"""{safe}{pad}"""\n\n{code}'


def progress_text(name: str, evaluation: dict[str, Any] | None, rungs: list[Any], waited_s: float) -> str:
    """'v004 is being judged (44 s): load ✓ compile ✓ correctness ✓, now benchmark'."""
    if evaluation is None or evaluation.get("status") == "queued":
        return f"{name} is written and waits for a judge ({waited_s:.0f} s)"
    done = " ".join(f"{r.name} {'✓' if r.ok else '✗' if r.ok is False else '·'}" for r in rungs)
    return f"{name} is being judged ({waited_s:.0f} s): {done or 'starting'}"


def judged_from(store: Store, evaluation: dict[str, Any]) -> Judged:
    """An evaluation as the agent reads it: rung by rung, the failure's message, the key figures."""
    name, status = evaluation["version"], evaluation["status"]
    rungs = store.rungs(evaluation["id"])
    lines = [f"{name}: {status}" + (f" (failed at {evaluation['failed_rung']})" if evaluation["failed_rung"] else "")]
    lines += [rung_line(r) for r in rungs]
    failed = next((r for r in rungs if r.ok is False), None)
    if failed and failed.err and "\n" in failed.err.strip():
        err = failed.err.strip()
        lines.append(f"\n{failed.name} error:\n{err[:ERROR_CHARS]}" + ("\n[cut]" if len(err) > ERROR_CHARS else ""))
    if evaluation.get("error") and not rungs:
        lines.append(str(evaluation["error"])[:ERROR_CHARS])
    flags = [Flag.from_json(f) for f in parse_flags(evaluation.get("flags"))]
    lines += [f"⚑ {f.name}: {f.reason} (a flagged version is not the best until the person approves it)" for f in flags]
    best = store.best_passing_text(evaluation["problem"])
    if best:
        lines.append(f"best passing so far: {best}")
    return Judged(
        problem=evaluation["problem"],
        version=name,
        status=status,
        summary="\n".join(lines),
        median_us=evaluation.get("median_us"),
        roofline_pct=evaluation.get("roofline_pct"),
        speedup=evaluation.get("speedup"),
        failed_rung=evaluation["failed_rung"],
        flags=flags,
        rungs=rungs,
    )


class Judging(Protocol):
    """What an agent's host asks of the judges: judge a version it wrote, profile or sanitize one."""

    def enqueue(self, path: Path) -> None: ...

    def ask(self, path: Path, kind: AskedKind) -> None: ...


@dataclass
class StoreHost:
    """agents.base.Host over the history; used from the agent's own thread only."""

    workspace: Workspace
    problem: ProblemInfo
    store: Store
    session_id: int
    judges: Judging | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    echo: Echo | None = None
    wait_s: float = 6 * 3600.0
    progress: Callable[[float, str], None] | None = None  # (seconds waited, how it goes) while awaiting a verdict
    on_pause: Callable[[str], None] | None = None  # the budget is spent: the person is told why
    pauses_on_budget: bool = True
    last_verdict: int = 0
    versions_written: int = 0
    errors: int = 0
    started: str = field(default_factory=now)  # evaluations finished from here on are this session's news
    reported: set[int] = field(default_factory=set)
    tokens_in: int = 0
    tokens_out: int = 0

    def write_version(self, code: str, notes: str, author: str) -> Judged:
        text = with_notes(code, notes)
        data = text.encode()
        digest = hashlib.sha256(data).hexdigest()
        folder = self.problem.folder
        temporary = folder / f".version.{os.getpid()}.{threading.get_ident()}.writing"
        temporary.write_bytes(data)
        try:
            with NUMBERING:
                path = self._link_next(temporary)
        finally:
            temporary.unlink(missing_ok=True)
        name = path.stem
        version_id = self.store.ensure_version(
            self.problem.name, name, path, digest, source.notes(text), author, len(data), source=text
        )
        self.versions_written += 1
        self.store.count_agent_version(self.session_id)
        if self.judges:
            self.judges.enqueue(path)
        return self._wait_for(version_id, name)

    def _link_next(self, temporary: Path) -> Path:
        """The next free vNNN.py, made from the whole file at once; a name another writer took is skipped.

        A hard link never replaces an existing file, unlike a rename: two agents on one problem (in two
        processes) cannot overwrite each other's versions.
        """
        number = self._next_number()
        while True:
            path = self.problem.folder / f"v{number:03d}.py"
            try:
                os.link(temporary, path)
                return path
            except FileExistsError:
                number += 1

    def _next_number(self) -> int:
        on_disk = [int(m.group(1)) for p in self.problem.folder.iterdir() if (m := VERSION_RE.match(p.name))]
        recorded = self.store.max_version_number(self.problem.name)
        return max([0, recorded, *on_disk]) + 1

    def _wait_for(self, version_id: int, name: str) -> Judged:
        """The verdict, waited for at most wait_s (MCP clients give up on a call after about a minute): past
        that, status "judging" and how to wait on. Progress goes to `progress` as the rungs land, and at least
        every HEARTBEAT_S."""
        start = time.monotonic()
        rungs_seen, told = -1, start
        while time.monotonic() - start < self.wait_s:
            found = self.store.latest_evaluation(version_id=version_id)
            if found and found["status"] in FINAL:
                return judged_from(self.store, found)
            rungs = self.store.rungs(found["id"]) if found else []
            if self.progress and (len(rungs) != rungs_seen or time.monotonic() - told > HEARTBEAT_S):
                rungs_seen, told = len(rungs), time.monotonic()
                waited = time.monotonic() - start  # MCP progress only ever increases: the seconds waited do
                self.progress(round(waited, 1), progress_text(name, found, rungs, waited))
            if self.stop.wait(POLL_S):
                said = f"{name} was written; the session stopped before it was judged"
                return Judged(self.problem.name, name, "stopped", said)
        found = self.store.latest_evaluation(version_id=version_id)
        rungs = self.store.rungs(found["id"]) if found else []
        said = (
            f"{progress_text(name, found, rungs, self.wait_s)}. Call wait_for_verdict with version {name!r} to wait "
            "for its verdict."
        )
        return Judged(self.problem.name, name, "judging", said)

    def wait_verdict(self, version: str) -> Judged | None:
        """The newest evaluation of `version` once it is final (waited for as write_version waits); None: no
        such version."""
        row = next((r for r in self.store.version_rows(self.problem.name) if r["name"] == version), None)
        return None if row is None else self._wait_for(row["version_id"], version)

    def profile(self, version: str) -> str:
        return self._asked(version, "profile", self.store.latest_profile_id, self._profile_text)

    def sanitize(self, version: str) -> str:
        return self._asked(version, "sanitize", self._newest_sanitized, self._sanitized_text)

    def _asked(
        self, version: str, kind: AskedKind, newest: Callable[[int], int | None], text: Callable[[int], str]
    ) -> str:
        """Asks the judges for `kind` of the version and waits for an evaluation newer than its `newest` before:
        its `text`, or why there is none."""
        row = next((r for r in self.store.version_rows(self.problem.name) if r["name"] == version), None)
        if row is None or not row.get("path"):
            return f"no version {version}"
        what = ASKED_WORDS[kind]
        if self.judges is None:
            return f"no judge runs in this session: nothing can {what[0]}"
        before = newest(row["version_id"]) or 0
        try:
            self.judges.ask(Path(row["path"]), kind)
        except Exception as exc:  # refused: its file is gone, judging is off
            return f"not {what[1]}: {exc}"
        deadline = time.monotonic() + self.wait_s
        while time.monotonic() < deadline:
            found = newest(row["version_id"])
            if found and found > before:
                return text(found)
            if self.stop.wait(POLL_S):
                return f"{version}: the session stopped before its {what[2]} finished"
        return f"{version} was not {what[1]} within {self.wait_s:.0f} s: is a judge running?"

    def _profile_text(self, evaluation_id: int) -> str:
        rung = next((r for r in self.store.rungs(evaluation_id) if r.name == "profile"), None)
        evaluation = self.store.evaluation(evaluation_id) or {}
        if rung is None:
            return judged_from(self.store, evaluation).summary
        best = self.store.best_profile(self.problem.name, int(evaluation["version_id"]), evaluation.get("device_name"))
        return profile_text(rung, best)

    def _newest_sanitized(self, version_id: int) -> int | None:
        found = self.store.latest_evaluation(version_id=version_id, statuses=FINAL)
        kind = json.loads(found.get("options") or "{}").get("kind") if found else None
        return int(found["id"]) if found and kind == "sanitize" else None

    def _sanitized_text(self, evaluation_id: int) -> str:
        rung = next((r for r in self.store.rungs(evaluation_id) if r.name == "sanitize"), None)
        summary = judged_from(self.store, self.store.evaluation(evaluation_id) or {}).summary
        return f"{rung_line(rung)}\n{summary}" if rung else summary

    def results(self, version: str) -> Judged | None:
        found = self.store.latest_evaluation(self.problem.name, version)
        return judged_from(self.store, found) if found else None

    def version_names(self) -> list[str]:
        return [r["name"] for r in self.store.version_rows(self.problem.name)]

    def dumps(self, version: str) -> list[dict[str, Any]]:
        found = self.store.latest_evaluation(self.problem.name, version, statuses=("pass", "fail", "unverified"))
        return self.store.artifacts(found["id"]) if found else []

    def feedback(self) -> list[Feedback]:
        verdicts = self.store.verdicts_after(self.problem.name, self.last_verdict)
        self.last_verdict = max([self.last_verdict, *(v["id"] for v in verdicts)])
        items = [
            Feedback("verdict", v["reason"] or "", v["who"] or "", v["created"] or "", v["version"], v["verdict"])
            for v in verdicts
        ]
        items += [
            Feedback("guidance", g["text"], g["who"] or "", g["created"] or "")
            for g in self.store.take_guidance(self.problem.name, self.session_id)
        ]
        return items

    def finished(self) -> list[Judged]:
        found = self.store.finished_since(self.problem.name, self.started, tuple(FINAL))
        new = [row for row in found if row["id"] not in self.reported]
        self.reported.update(row["id"] for row in new)
        return [judged_from(self.store, row) for row in new]

    def record(self, kind: str, text: str = "", **data: Any) -> None:
        self.store.add_agent_event(self.session_id, self.problem.name, kind, text, data)
        self.errors += kind == "error"
        if kind == "turn":
            changes: dict[str, Any] = {"turns": data.get("turn", 0)}
            if data.get("total_cost_usd") is not None:
                changes["cost_usd"] = data["total_cost_usd"]
            if "input_tokens" in data:  # cached input counts: the model read it
                self.tokens_in += sum(int(data.get(k) or 0) for k in INPUT_TOKENS)
                self.tokens_out += int(data.get("output_tokens") or 0)
                changes.update(input_tokens=self.tokens_in, output_tokens=self.tokens_out)
            self.store.update_agent_session(self.session_id, **changes)
        if self.echo:
            self.echo(kind, text, data)

    def stop_requested(self) -> bool:
        return self.stop.is_set()

    def wait_for_more(self, reason: str, budget: Budget) -> Budget | None:
        """Paused: the session says why and waits for a grant recorded in the history (the dashboard's +, or
        `kerneltui grant PROBLEM` from any shell) or a stop."""
        how = f"+ on the dashboard, or kerneltui grant {self.problem.name}"
        said = f"{reason}: paused until you grant more ({how}) or stop it"
        paused = self.store.add_agent_event(self.session_id, self.problem.name, "paused", said, {"reason": reason})
        if self.echo:
            self.echo("paused", said, {"reason": reason})
        if self.on_pause:
            self.on_pause(reason)
        while not self.stop.wait(GRANT_POLL_S):
            grant = self.store.grant_after(self.session_id, paused)
            if grant is not None:
                more = budget.extended(grant.get("versions"), grant.get("cost_usd"))
                self.record("resumed", f"granted {granted_text(grant)}: going on", **grant)
                return more
        return None

    def judging(self) -> int:
        return self.store.pending_count(self.problem.name)

    def session_versions(self) -> int:
        return self.store.versions_judged_since(self.problem.name, self.started, tuple(FINAL))


@dataclass
class AgentRun:
    """One agent on one problem, in a thread of this process."""

    agent: Agent
    problem: str
    stop: threading.Event = field(default_factory=threading.Event)
    reason: str | None = None
    session_id: int | None = None
    failed: bool = False  # an API error or a crash ended it, not a budget, a target or a person
    budget: Budget | None = None  # None: the config's
    hidden: tuple[Path, ...] = ()  # workspace folders its tools may not open
    on_pause: Callable[[str], None] | None = None  # its budget is spent: it waits for the person
    pauses_on_budget: bool = True  # False: a spent budget ends it (a benchmark's pairs)

    def request_stop(self) -> None:
        self.stop.set()
        self.agent.cancel()


def run_agent(
    workspace: Workspace,
    run: AgentRun,
    budget: Budget,
    context: Path | None,
    judges: Judging | None,
    echo: Echo | None = None,
) -> str:
    """Runs the agent to its end in this thread; the session and its reason are recorded whatever happens."""
    opened = Store.open(workspace.db_path, check=False)
    store = opened.store
    try:
        session_id = store.start_agent_session(run.problem, run.agent.backend, run.agent.model, os.getpid())
        run.session_id = session_id
        host: StoreHost | None = None
        reason = "the agent's thread was cut short"  # what stays recorded if something escapes below
        try:
            info = problem_info(workspace, run.problem, context, run.hidden)
            host = StoreHost(
                workspace, info, store, session_id, judges, run.stop, echo,
                on_pause=run.on_pause, pauses_on_budget=run.pauses_on_budget,
            )  # fmt: skip
            reason = run.agent.run(host, budget)
        except Exception as exc:  # an agent bug (or a problem folder gone) ends its session, never the dashboard
            reason = f"the agent {'crashed' if host else 'could not start'}: {type(exc).__name__}: {exc}"
            if host is not None:
                host.record("error", reason)
                host.record("stop", reason)
        finally:  # a BaseException too (asyncio's CancelledError): the session never stays open
            run.reason = reason
            run.failed = (host is None or host.errors > 0) and not run.stop.is_set()
            store.update_agent_session(session_id, ended=now(), stop_reason=reason)
    finally:
        store.close()
    return reason


class AgentSetupError(Exception):
    """An agent cannot start as configured; the message says what to set."""


def make_agent(
    config: AgentConfig,
    problem: str,
    workspace: Workspace,
    acp_agents: dict[str, str] | None = None,
    asker: Callable[[PermissionAsk], None] | None = None,
    config_file: Path | None = None,
    hidden: tuple[Path, ...] = (),
) -> Agent:
    """The configured backend for this problem; AgentSetupError says what is missing. `config_file`: the
    person's config, handed on to the MCP server an ACP agent starts; `hidden`: folders closed to its tools."""
    if config.backend == "acp":
        return make_acp_agent(config, problem, workspace, acp_agents or {}, asker, config_file, hidden)
    if config.backend == "replay":
        from agents.replay import RecordingError, ReplayAgent, builtin_recordings, load_recording

        folder = Path(config.recording).expanduser() if config.recording else builtin_recordings().get(problem)
        if folder is None:
            shipped = ", ".join(builtin_recordings()) or "none"
            raise AgentSetupError(
                f"no recorded session for {problem} (recordings ship for {shipped}); give one with --recording DIR"
            )
        try:
            return ReplayAgent(load_recording(folder), pace=config.pace)
        except RecordingError as exc:
            raise AgentSetupError(str(exc)) from None
    from agents.claude import ClaudeAgent, has_credentials

    if not has_credentials():
        raise AgentSetupError(
            "no Anthropic credentials: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a proxy or gateway); "
            "`kerneltui demo` needs neither"
        )
    prices = {prefix: (float(v[0]), float(v[1])) for prefix, v in config.prices.items()}
    return ClaudeAgent(
        model=config.model,
        stream=config.stream,
        timeout=config.timeout,
        max_retries=config.max_retries,
        retry_wait=config.retry_wait,
        prices=prices,
    )


def make_acp_agent(
    config: AgentConfig,
    problem: str,
    workspace: Workspace,
    acp_agents: dict[str, str],
    asker: Callable[[PermissionAsk], None] | None,
    config_file: Path | None = None,
    hidden: tuple[Path, ...] = (),
) -> Agent:
    import shutil

    from agents.acp import AcpAgent, mcp_command, split_command

    line = acp_agents.get(config.acp, config.acp)
    try:
        command = split_command(line)
    except ValueError as exc:
        raise AgentSetupError(f"[agent] acp = {config.acp!r}: {exc}") from None
    found = shutil.which(command[0])
    if found is None:
        known = ", ".join(sorted(acp_agents)) or "none"
        raise AgentSetupError(f"{command[0]} is not installed or not on PATH (ACP agents in the config: {known})")
    command[0] = str(Path(found).absolute())  # it runs in the problem folder, not here
    logs = workspace.state / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    name = config.acp if config.acp in acp_agents else command[0]
    mcp = mcp_command(workspace.root, config_file if config_file and config_file.is_file() else None, hidden, problem)
    return AcpAgent(
        command,
        mcp,
        config.permissions,
        asker,
        logs / f"acp-{problem}.log",
        name,
        startup_timeout_s=config.startup_timeout_s,
        silence_timeout_s=config.silence_timeout_s,
    )


def grant_budget(config: AgentConfig) -> dict[str, Any]:
    """What one grant gives a paused agent: the config's budget again ({"versions": n, "cost_usd": x})."""
    return {k: v for k, v in (("versions", config.max_versions), ("cost_usd", config.max_cost_usd)) if v}


def budget_from(config: AgentConfig) -> Budget:
    return Budget(config.max_versions, config.max_cost_usd, config.target_roofline_pct)
