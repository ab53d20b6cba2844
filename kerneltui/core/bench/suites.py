"""Agents measured on a suite of problems: each agent works on its own copy of each problem, judged by one queue.

A bench is a workspace of its own: each (problem, agent) pair is a folder `<problem>--<agent>` copied from the
suite (its versions left out), so every agent starts from the same problem and its versions are its own. One
Session judges them all, in one queue (one benchmark at a time per GPU: agents racing are timed fairly), and an
agent's tools may not open the other agents' folders. Runs and their entries are rows in that workspace's
history; the leaderboard is computed from the history, not kept beside it.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kerneltui.core.agents.host import AgentRun
from kerneltui.core.bench import leaderboard
from kerneltui.core.config import AgentConfig, Config
from kerneltui.core.session import AgentEnded, Session, SessionEvent, SessionRefused
from kerneltui.core.workspace import VERSION_RE, Workspace, is_problem_dir
from kerneltui.history.store import Store, now

SAFE = re.compile(r"[^A-Za-z0-9._-]+")
DRAIN_WAIT_S = 600.0  # after the agents end: versions still queued are judged before the figures are taken


class BenchError(Exception):
    """A suite or an agent that cannot be benched; the message says what to fix."""


@dataclass(frozen=True)
class AgentSpec:
    """One agent of a bench: `replay[:DIR]`, `claude[:MODEL]`, `acp:NAME_OR_COMMAND` or a name from [acp],
    optionally labelled `LABEL=SPEC`."""

    label: str
    spec: str
    backend: str
    model: str | None = None
    recording: Path | None = None
    acp: str | None = None

    def config(self, base: AgentConfig, problem: str) -> AgentConfig:
        """The agent config for this problem (of the suite); BenchError when it cannot run on it."""
        changes: dict[str, Any] = {"backend": self.backend}
        if self.model:
            changes["model"] = self.model
        if self.acp:
            changes["acp"] = self.acp
        if self.backend == "replay":
            changes["recording"] = str(self.recording_for(problem))
        return base.model_copy(update=changes)

    def recording_for(self, problem: str) -> Path:
        from agents.replay import builtin_recordings

        if self.recording is None:
            found = builtin_recordings().get(problem)
        elif (self.recording / "session.json").is_file():
            found = self.recording
        else:
            found = self.recording / problem if (self.recording / problem / "session.json").is_file() else None
        if found is None:
            where = self.recording or "the recordings shipped with kerneltui"
            raise BenchError(f"no recorded session for {problem} in {where}")
        return found


def parse_agent(text: str, acp_agents: dict[str, str], default_model: str) -> AgentSpec:
    label, _, spec = text.rpartition("=") if "=" in text.split(":", 1)[0] else ("", "", text)
    kind, _, arg = spec.partition(":")
    if kind == "replay":
        found = AgentSpec(label or "replay", spec, "replay", recording=Path(arg).expanduser() if arg else None)
    elif kind == "claude":
        found = AgentSpec(label or arg or default_model, spec, "claude", model=arg or None)
    elif kind == "acp" and arg:
        found = AgentSpec(label or arg.split()[0].rsplit("/", 1)[-1], spec, "acp", acp=arg)
    elif spec in acp_agents:
        found = AgentSpec(label or spec, spec, "acp", acp=spec)
    else:
        known = ", ".join(sorted(acp_agents)) or "none"
        raise BenchError(
            f"agent {text!r}: expected replay[:DIR], claude[:MODEL], acp:NAME_OR_COMMAND or an [acp] name ({known})"
        )
    safe = SAFE.sub("-", found.label).strip("-.") or found.backend
    return dataclasses.replace(found, label=safe)


def suite_problems(path: Path) -> list[Path]:
    """A problem folder, a folder of problem folders, or a file naming problem folders one per line (# comments)."""
    path = path.expanduser()
    if path.is_file():
        lines = [line.split("#", 1)[0].strip() for line in path.read_text(errors="replace").splitlines()]
        found = [(path.parent / line).resolve() for line in lines if line]
        missing = [str(p) for p in found if not (p / "problem.py").is_file()]
        if missing:
            raise BenchError(f"{path}: not problem folders (no problem.py): {', '.join(missing[:5])}")
    elif is_problem_dir(path):
        found = [path.resolve()]
    elif path.is_dir():
        found = [p.resolve() for p in Workspace(path).problems()]
    else:
        raise BenchError(f"suite {path} does not exist")
    if not found:
        raise BenchError(f"suite {path} holds no problem folders (<problem>/problem.py)")
    names = [p.name for p in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BenchError(f"suite {path} names two problems alike: {', '.join(twice)}")
    return found


def copy_problem(source: Path, into: Path, name: str) -> str:
    """The problem folder without its versions, state or caches, under a name not yet taken."""
    folder, n = into / name, 1
    while folder.exists():
        n += 1
        folder = into / f"{name}-{n}"

    def left_out(_: str, names: list[str]) -> list[str]:
        return [x for x in names if VERSION_RE.match(x) or x in ("__pycache__", ".kerneltui") or x.startswith(".")]

    shutil.copytree(source, folder, ignore=left_out)
    return folder.name


@dataclass
class Pair:
    problem: str  # the suite's name for it
    spec: AgentSpec
    folder: str  # the bench workspace's
    entry_id: int


class Bench:
    """One run of agents over a suite, into a bench workspace."""

    def __init__(
        self,
        into: Path,
        config: Config,
        specs: list[AgentSpec],
        race: bool = False,
        say: Callable[[str], None] = print,
        minutes: float | None = None,
    ) -> None:
        labels = [s.label for s in specs]
        if len(set(labels)) != len(labels):
            raise BenchError(f"two agents are labelled alike ({', '.join(labels)}): name them LABEL=SPEC")
        into.mkdir(parents=True, exist_ok=True)
        self.workspace = Workspace(into.resolve())
        self.config, self.specs, self.race, self.say = config, specs, race, say
        self.minutes = minutes  # each (problem, agent)'s wall-clock limit, from its start
        self.session = Session(self.workspace, config, self._heard)
        self.ended: dict[str, threading.Event] = {}

    def run(self, suite: Path, problems: list[Path], settings: dict[str, Any]) -> int:
        """Every agent on every problem (racing on each problem at once with `race`); the run's id."""
        store = Store.open(self.workspace.db_path, check=False).store
        try:
            run_id = store.start_bench_run(str(suite), {**settings, "agents": [s.spec for s in self.specs]})
            pairs = [self._prepare(store, run_id, p, s) for p in problems for s in self.specs]
            self.session.start_scheduler(wait_s=120)
            by_problem = [[q for q in pairs if q.problem == p.name] for p in problems]
            groups = by_problem if self.race else [[q] for q in pairs]
            try:
                for group in groups:
                    self._run_group(store, group)
                self._drain()
            finally:
                store.end_bench_run(run_id)
            return run_id
        finally:
            self.session.close("the bench ended")
            store.close()

    def _prepare(self, store: Store, run_id: int, problem: Path, spec: AgentSpec) -> Pair:
        folder = copy_problem(problem, self.workspace.root, f"{problem.name}--{spec.label}")
        entry_id = store.add_bench_entry(run_id, problem.name, spec.label, spec.spec, folder)
        return Pair(problem.name, spec, folder, entry_id)

    def _run_group(self, store: Store, group: list[Pair]) -> None:
        """Starts each pair's agent (a thread each) and waits for them all; a pair that cannot start says why."""
        threads = []
        for pair in group:
            hidden = tuple(p for p in self.workspace.problems() if p.name != pair.folder)
            try:
                agent_config = pair.spec.config(self.config.agent, pair.problem)
                run = self.session.start_agent(pair.folder, agent=agent_config, hidden=hidden)
                run.pauses_on_budget = False  # unattended: a pair's budget ends it
            except (BenchError, SessionRefused) as exc:
                store.update_bench_entry(pair.entry_id, error=str(exc), ended=now())
                self.say(f"✗ {pair.problem} · {pair.spec.label}: {exc}")
                continue
            store.update_bench_entry(pair.entry_id, started=now())
            self.say(f"● {pair.problem} · {pair.spec.label} starts ({pair.folder})")
            self.ended[pair.folder] = threading.Event()
            threads.append((pair, run, threading.Thread(target=self.session.run_agent, args=(run,), daemon=True)))
        for _, _, thread in threads:
            thread.start()
        try:
            deadline = None if self.minutes is None else time.monotonic() + 60 * self.minutes
            for pair, run, _ in threads:
                reason = self._wait_or_stop(pair, run, deadline)
                store.update_bench_entry(
                    pair.entry_id, session_id=run.session_id, ended=now(), stop_reason=reason, error=None
                )
        except KeyboardInterrupt:
            for _, run, _ in threads:
                run.request_stop()
            for pair, run, _ in threads:
                self.ended[pair.folder].wait(30)
                ended = {"session_id": run.session_id, "ended": now(), "stop_reason": "interrupted"}
                store.update_bench_entry(pair.entry_id, **ended)
            raise

    def _wait_or_stop(self, pair: Pair, run: AgentRun, deadline: float | None) -> str:
        """Why the pair's agent ended; past the deadline it is asked to stop and the limit is the reason."""
        ended = self.ended[pair.folder]
        if deadline is None or ended.wait(max(0.0, deadline - time.monotonic())):
            ended.wait()
            return run.reason or ""
        run.request_stop()
        ended.wait()
        return f"the bench's time limit ({self.minutes:g} min); the agent said: {run.reason or 'nothing'}"

    def _drain(self) -> None:
        """Waits (bounded) for versions still queued: the figures are taken once every verdict is in."""
        finished = threading.Event()
        waited = 0.0
        while self.session.pending and waited < DRAIN_WAIT_S:
            finished.wait(0.2)
            waited += 0.2

    def _heard(self, event: SessionEvent) -> None:
        from kerneltui.core.judging.events import SchedulerEvent

        if isinstance(event, AgentEnded):
            self.say(f"■ {event.problem}: {event.reason}")
            done = self.ended.get(event.problem)
            if done:
                done.set()
        elif isinstance(event, SchedulerEvent) and event.kind == "finished":
            data = event.data
            speed = f" · {data['speedup']:.2f}× the reference" if data.get("speedup") else ""
            self.say(f"  ◆ {event.problem}/{event.version}: {data.get('status')}{speed}")
        elif isinstance(event, SchedulerEvent) and event.kind == "warning":
            self.say(f"warning: {event.data.get('message')}")


def read_board(
    workspace: Workspace, run_id: int | None = None, ps: tuple[float, ...] | None = None
) -> leaderboard.Leaderboard | None:
    """The leaderboard of a run (default: the newest) from the workspace's history; None when it has no bench."""
    if not workspace.db_path.is_file():
        return None
    store = Store(workspace.db_path, create=False)
    try:
        return board_from(store, run_id, ps)
    except sqlite3.OperationalError:  # a history from before benches
        return None
    finally:
        store.close()


def board_from(store: Store, run_id: int | None, ps: tuple[float, ...] | None) -> leaderboard.Leaderboard | None:
    """The run's leaderboard from an open history (the dashboard reads it on its own connection)."""
    run = next((r for r in store.bench_runs(limit=1000) if run_id is None or r["id"] == run_id), None)
    if run is None:
        return None
    chosen = ps or tuple(float(p) for p in run["settings"].get("ps") or leaderboard.DEFAULT_PS)
    entries = [
        leaderboard.entry_figures(row, store.entry_evaluations(row["folder"])) for row in store.bench_entries(run["id"])
    ]
    return leaderboard.build(run, entries, chosen)
