"""The supervisor with no screen: the history's connections, the scheduler and the agents' runs.

A front end (the dashboard, the CLI, the MCP server) asks it to read, judge, record verdicts and
guidance, start, stop or answer agents, and run external agents' tool calls (kerneltui.core.agents.external),
and hears back through typed events (`SessionEvent`), which arrive on other threads.
Its reads and writes block: a front end calls them from worker threads, never its UI thread.
"""

from __future__ import annotations

import getpass
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.acp import AcpAgent
from harness.contract.results import AskedKind
from kerneltui.core.agents.external import ExternalAgents, Progress, ToolOutcome
from kerneltui.core.agents.host import (
    AgentRun,
    AgentSetupError,
    Echo,
    budget_from,
    find_context,
    grant_budget,
    make_agent,
    run_agent,
)
from kerneltui.core.agents.persons_word import PersonsWord, Recorded
from kerneltui.core.config import AgentConfig, Config
from kerneltui.core.judging.scheduler import Scheduler, SchedulerEvent
from kerneltui.core.workspace import Workspace
from kerneltui.history.reads import resource_rows
from kerneltui.history.store import Store, now

READERS = ("snapshot", "detail", "poll")  # one connection per reading thread: none waits on another's query


@dataclass(frozen=True)
class AgentEnded:
    problem: str
    reason: str
    failed: bool


@dataclass(frozen=True)
class PermissionWaiting:
    """An ACP agent asks the person before it acts (answered with `answer_permission`)."""

    problem: str
    ask: Any


@dataclass(frozen=True)
class AgentPaused:
    """An agent's budget is spent: it waits for the person to grant more (`grant_more`) or to stop it."""

    problem: str
    reason: str


SessionEvent = SchedulerEvent | Recorded | AgentEnded | PermissionWaiting | AgentPaused


@dataclass
class HistoryView:
    """One problem as the history holds it, with the list of all problems."""

    problems: list[dict[str, Any]] = field(default_factory=list)
    versions: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None
    pending: int = 0
    guidance: list[dict[str, Any]] = field(default_factory=list)
    agent_session: dict[str, Any] | None = None
    agent_events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Detail:
    """The selected version's rungs, files and neighbours (previous, best on its GPU, last approved)."""

    version: dict[str, Any]
    rungs: list[Any] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""
    compare: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    compare_sources: dict[str, str] = field(default_factory=dict)
    compare_artifacts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    cases: list[dict[str, Any]] = field(default_factory=list)
    trends: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)  # registers and spills per version
    rung_lines: list[Any] = field(default_factory=list)  # drawn by a front end, off its UI thread
    diffs: dict[str, list[Any]] = field(default_factory=dict)
    best_profile: tuple[str, Any] | None = None  # the best's name and profile rung, beside this one's profile


class SessionRefused(Exception):
    """What was asked cannot be done now; the message says why, for the person."""


class Session(PersonsWord):
    def __init__(
        self,
        workspace: Workspace,
        config: Config,
        on_event: Callable[[SessionEvent], None],
        run_scheduler: bool = True,
        run_judges: bool = True,
        echo: Echo | None = None,
    ) -> None:
        self.workspace, self.config, self.on_event = workspace, config, on_event
        self.echo = echo  # each agent event as it happens, for a headless front end's terminal
        self.run_scheduler, self.run_judges = run_scheduler, run_judges
        self.scheduler: Scheduler | None = None
        self.stores: dict[str, Store] = {}
        self.writer_lock = threading.Lock()  # guards self.stores and self.closed
        self.closed = False
        self.agents: dict[str, AgentRun] = {}
        self.asks: dict[str, Any] = {}  # problem -> the ACP permission request waiting for an answer
        self.last_version = -1
        self.who = getpass.getuser()
        self.external = ExternalAgents(
            workspace, config.agent.context, SessionJudging(self), config.agent.verdict_wait_s
        )

    # --- the history ---------------------------------------------------------------------------

    @property
    def has_history(self) -> bool:
        return self.workspace.db_path.is_file()

    def open_writer(self) -> Store:
        """The connection verdicts and guidance are written with; opened once, by the first thread to need it.
        A history that could not be read is moved aside: said as Recorded('history', ...)."""
        with self.writer_lock:
            if "write" in self.stores:
                return self.stores["write"]
            if self.closed:
                raise SessionRefused("kerneltui is closing: nothing more is written")
            opened = Store.open(self.workspace.db_path, check=False)
            self.stores["write"] = opened.store
        if opened.warning or "snapshot" not in self.stores:
            self.open_readers()
        if opened.warning:
            self.on_event(Recorded("history", opened.warning))
        return opened.store

    def open_readers(self) -> None:
        for name in READERS:
            with self.writer_lock:  # never while close() goes over the stores
                if self.closed:
                    return
                old = self.stores.get(name)
                self.stores[name] = Store(self.workspace.db_path, create=False)
            if old is not None:
                old.close()

    @contextmanager
    def reading(self, name: str) -> Iterator[Store | None]:
        """The named reader, held while a thread reads it (None before it is opened or once closed)."""
        store = self.stores.get(name)
        if store is None:
            yield None
            return
        with store.held() as held:
            yield held

    def history_changed(self) -> bool:
        """Whether any process wrote the history since the last look (the CLI's approve, reject, guide)."""
        with self.reading("poll") as store:
            if store is None:
                return False
            version = store.data_version()
        changed, self.last_version = version != self.last_version, version
        return changed

    def read_view(self, store: Store, problem: str | None) -> HistoryView:
        problems = store.problem_rows()
        problem = problem or (problems[0]["name"] if problems else None)
        if problem is None:
            return HistoryView(problems=problems, pending=store.pending_count())
        session, events = store.latest_agent(problem)
        if session is not None:
            session = {**session, "figures": store.session_figures(session)}
        return HistoryView(
            problems=problems,
            versions=store.version_rows(problem),
            problem=problem,
            pending=store.pending_count(),
            guidance=store.guidance(problem),
            agent_session=session,
            agent_events=events,
        )

    def read_detail(
        self, store: Store, row: dict[str, Any], problem: str, rows: list[dict[str, Any]], marked: int | None = None
    ) -> Detail:
        """`row` of the versions `rows` (newest first) with what it is compared with (`marked`: a version id the
        person marked to compare others with)."""
        evaluation_id = row.get("evaluation_id")
        detail = Detail(version=dict(row), source=store.version_source(row["version_id"]))
        if evaluation_id:
            detail.rungs = store.rungs(evaluation_id)
            detail.artifacts = store.artifacts(evaluation_id)
            detail.cases = store.case_results(evaluation_id)
        profiled = store.latest_profile(row["version_id"])  # `kerneltui profile`, recorded beside it
        if profiled and not any(r.name == "profile" for r in detail.rungs):
            detail.rungs.append(profiled)
        if any(r.name == "profile" and r.ok is True for r in detail.rungs):
            detail.best_profile = store.best_profile(problem, row["version_id"], row.get("device_name"))
        detail.trends = store.trend_rows(problem) if problem else []
        # drawn only when there are no timings: not read (every compile rung's JSON) on each cursor move otherwise
        detail.resources = resource_rows(store, problem) if problem and not detail.trends else []
        for target, other in compare_targets(store, row, problem, rows, marked).items():
            detail.compare[target] = other
            if other:
                detail.compare_sources[target] = store.version_source(other["version_id"])
                if other.get("evaluation_id"):
                    detail.compare_artifacts[target] = store.artifacts(other["evaluation_id"])
        return detail

    # --- judging -------------------------------------------------------------------------------

    def start_scheduler(self, wait_s: float = 0.0) -> bool:
        """Starts judging (once); False when this session does not judge. `wait_s`: wait until the scheduler
        has scanned the workspace and started its judges (or found another kerneltui judging it)."""
        if not self.run_scheduler or self.scheduler is not None:
            return False
        self.scheduler = Scheduler(
            self.workspace,
            self.config.ladder,
            self.on_event,
            run_judges=self.run_judges,
            feedback_file=self.config.agent.feedback_file,
        )
        self.scheduler.start()
        if wait_s:
            self.scheduler.started.wait(wait_s)
        return True

    def judge_again(self, path: Path) -> None:
        if self.scheduler is None:
            raise SessionRefused("judging is off in this session")
        if not path.is_file():
            raise SessionRefused(f"{path} is gone: nothing to judge again")
        self.scheduler.enqueue(path, force=True)

    def ask(self, path: Path, kind: AskedKind) -> None:
        """Queues the version for a profile under Nsight Compute (shown with its rungs) or to be judged again under
        compute-sanitizer's tools (the sanitize rung)."""
        if self.scheduler is None:
            raise SessionRefused("judging is off in this session")
        if not path.is_file():
            raise SessionRefused(f"{path} is gone: nothing to {kind}")
        self.scheduler.ask(path, kind)

    @property
    def pending(self) -> int:
        return self.scheduler.pending if self.scheduler else 0

    # --- agents --------------------------------------------------------------------------------

    def start_agent(
        self,
        problem: str,
        judged_elsewhere: bool = False,
        agent: AgentConfig | None = None,
        hidden: tuple[Path, ...] = (),
    ) -> AgentRun:
        """An agent made for the problem and listed; run it with run_agent (in a thread of its own). `agent`: its
        backend and budget when not the config's; `hidden`: workspace folders its tools may not open."""
        if problem in self.agents:
            raise SessionRefused(f"an agent is already working on {problem}: x stops it")
        if not (self.run_scheduler and (self.run_judges or judged_elsewhere)):
            raise SessionRefused("judging is off in this dashboard: an agent's versions would never be judged")
        asker = self._asker(problem)
        chosen = agent or self.config.agent
        try:
            made = make_agent(chosen, problem, self.workspace, self.config.acp_agents, asker, self.config.path, hidden)
        except AgentSetupError as exc:
            raise SessionRefused(str(exc)) from None
        run = AgentRun(made, problem, budget=budget_from(chosen), hidden=hidden)
        run.on_pause = lambda reason: self.on_event(AgentPaused(problem, reason))
        run.pauses_on_budget = chosen.on_budget == "pause"
        self.agents[problem] = run
        return run

    def _asker(self, problem: str) -> Callable[[Any], None]:
        def ask(request: Any) -> None:  # the agent's thread
            self.asks[problem] = request
            self.on_event(PermissionWaiting(problem, request))

        return ask

    def run_agent(self, run: AgentRun) -> None:
        """Runs the agent to its end (blocking); AgentEnded says how, whatever happens."""
        reason, failed = "it ended", True
        try:
            context = find_context(self.workspace, self.config.agent.context)
            judges = SessionJudging(self)
            budget = run.budget or budget_from(self.config.agent)
            reason = run_agent(self.workspace, run, budget, context, judges, self.echo)
            failed = run.failed
        except Exception as exc:  # the history could not be opened: said, and the agent is not left listed
            reason = f"it could not start: {type(exc).__name__}: {exc}"
        finally:
            self.agents.pop(run.problem, None)
            self.asks.pop(run.problem, None)
            self.on_event(AgentEnded(run.problem, reason, failed))

    def stop_agent(self, problem: str) -> AgentRun:
        run = self.agents.get(problem)
        if run is None:
            raise SessionRefused("no agent of this dashboard is working on this problem")
        run.request_stop()
        return run

    def grant_more(self, problem: str) -> str:
        """Grants the problem's paused agent its budget again (the config's versions and cost, more); what was
        granted. SessionRefused where no agent of this dashboard waits on a spent budget."""
        run = self.agents.get(problem)
        if run is None or run.session_id is None:
            raise SessionRefused("no agent of this dashboard is working on this problem")
        with self.open_writer().held() as store:
            if store is None:
                raise SessionRefused("the history cannot be written now: try again")
            granted = store.grant(run.session_id, problem, grant_budget(self.config.agent))
        if granted is None:
            raise SessionRefused("the agent is not paused: its budget is not spent")
        return granted

    def abandon_agent(self, run: AgentRun, reason: str) -> None:
        """Records the session of an agent that did not stop when asked as ended (its thread is left to die with
        the process): the history never keeps it open."""
        if run.session_id is None:
            return
        with self.open_writer().held() as store:
            if store is None:
                return
            store.add_agent_event(run.session_id, run.problem, "stop", reason, {})
            store.update_agent_session(run.session_id, ended=now(), stop_reason=reason)

    def interrupt_agent(self, problem: str) -> bool:
        """Ends an ACP agent's running turn so queued guidance goes now; False when there is none."""
        run = self.agents.get(problem)
        if run is None or not isinstance(run.agent, AcpAgent) or not run.agent.busy:
            return False  # only an ACP agent has turns to interrupt, and only while one runs
        run.agent.interrupt()
        return True

    def answer_permission(self, problem: str, kind: str) -> bool:
        """allow_once, allow_always or reject; False when nothing waits."""
        ask = self.asks.pop(problem, None)
        if ask is None:
            return False
        kinds = ("reject_once", "reject_always") if kind == "reject" else (kind,)
        option = ask.option_for(kinds) or (ask.option_for(("allow_once",)) if kind == "allow_always" else None)
        ask.answer(option)
        return True

    # --- agents kerneltui does not run (an MCP client) -----------------------------------------

    def join_agent_session(self, session_id: int) -> None:
        """External calls on that session's problem are recorded into it (its driver ends it);
        WorkspaceError when there is no such session."""
        self.external.join(session_id)

    def tool_call(
        self, problem: str, client: str, tool: str, args: dict[str, Any], progress: Progress | None = None
    ) -> ToolOutcome:
        """An external agent's call of one of agents/tools.py's tools, recorded; ToolError when it refused.
        `progress`: told how judging goes while a verdict is awaited."""
        return self.external.tool_call(problem, client, tool, args, progress)

    def guidance_for(self, problem: str, client: str) -> ToolOutcome:
        """The person's guidance and verdicts since the external agent last asked, recorded as delivered."""
        return self.external.guidance(problem, client)

    def end_external(self, reason: str) -> None:
        """Ends the external agents' sessions (once), saying why; a write still waiting returns 'stopped'."""
        self.external.close(reason)

    def close(self, reason: str = "kerneltui stopped") -> None:
        """`reason`: why external agents' sessions end (an MCP client disconnected, say)."""
        self.end_external(reason)
        for run in list(self.agents.values()):
            run.request_stop()
        if self.scheduler:
            self.scheduler.stop()
        with self.writer_lock:  # a reading thread opening the readers now adds none after this
            self.closed = True
            stores = list(self.stores.values())
        for store in stores:
            store.close()


def compare_targets(
    store: Store, row: dict[str, Any], problem: str, rows: list[dict[str, Any]], marked: int | None = None
) -> dict[str, dict[str, Any] | None]:
    """What a version is compared with: the one before it (or the one its agent was rewound to since), the best on
    its own GPU, the last approved, what its file held before it was rewritten, and the version the person marked
    (one of this problem's)."""
    names = [r["name"] for r in rows]
    previous = rows[names.index(row["name"]) + 1] if row["name"] in names[:-1] else None
    after = previous.get("version_created") if previous else None
    rewound = store.rewound_between(problem, after, row.get("version_created"))
    if rewound:  # the agent was told to continue from an earlier version since: that one is this one's previous
        previous = next((r for r in rows if r["version_id"] == rewound["version_id"]), previous)
    best = store.best_passing(problem, row.get("device_name"))
    best_row = next((r for r in rows if best and r["version_id"] == best["version_id"]), None)
    approved = store.last_approved(problem)
    approved_row = next((r for r in rows if approved and r["version_id"] == approved["id"]), None)
    earlier = store.earlier_content(row["version_id"])
    if earlier is not None:
        earlier = {**earlier, "name": f"{earlier['name']} as written before ({str(earlier['created'])[:19]})"}
    marked_row = next((r for r in rows if marked is not None and r["version_id"] == marked), None)
    return {
        "previous": previous,
        "best": best_row,
        "approved": approved_row,
        "rewritten": earlier,
        "marked": marked_row,
    }


class SessionJudging:
    """The judges as an agent's host asks them (agent_host.Judging), through the session: its scheduler may
    start after the agent does."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def enqueue(self, path: Path) -> None:
        """A version an agent wrote, judged at once (without a scheduler, when a watcher sees it)."""
        if self.session.scheduler is not None:
            self.session.scheduler.enqueue(path)

    def ask(self, path: Path, kind: AskedKind) -> None:
        self.session.ask(path, kind)
