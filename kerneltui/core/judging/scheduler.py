"""The queue of evaluations and the judges that work through it (no Textual here).

One thread owns the scheduler's state and its database connection; everything else — the file
watcher, the judges' output readers, the dashboard — talks to it through a queue of commands. So
the dashboard never waits on a database write or a judge, and the judges are started by a thread
that lives as long as they do (they die with it: PDEATHSIG). Judges are `python -m harness serve`
processes: one per GPU (so one benchmark at a time per GPU), or `judges` of them with no GPU.
Queued evaluations are rows in the history, so the queue survives a restart.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.contract import protocol
from harness.contract.options import parse_rungs
from harness.contract.results import PROFILE_RUNGS, Evaluation
from kerneltui.core.agents.feedback import write_feedback
from kerneltui.core.config import LadderConfig
from kerneltui.core.judging.client import JudgeClient, JudgeEnded, JudgeLost, JudgeMessage, JudgeSaid, record_event
from kerneltui.core.judging.custody import Custody, judged_other_bytes
from kerneltui.core.judging.events import (
    AcceptProblem,
    Asked,
    AskedKind,
    Deleted,
    Enqueue,
    Ignored,
    ProblemSeen,
    SchedulerEvent,
    Stop,
)
from kerneltui.core.judging.fair_queue import FairQueue
from kerneltui.core.judging.intake import Intake
from kerneltui.core.judging.judge_faults import JudgeFaults
from kerneltui.core.judging.judges import make_judges
from kerneltui.core.judging.remote import RemoteError
from kerneltui.core.judging.watcher import WorkspaceWatcher
from kerneltui.core.workspace import Workspace
from kerneltui.history.store import Store

InboxMessage = Enqueue | Asked | AcceptProblem | Deleted | ProblemSeen | Ignored | Stop | JudgeMessage


class Scheduler(Intake, JudgeFaults):
    def __init__(
        self,
        workspace: Workspace,
        config: LadderConfig,
        notify: Callable[[SchedulerEvent], None],
        run_judges: bool = True,
        watch: bool = True,
        feedback_file: bool = True,
    ) -> None:
        self.workspace = workspace
        self.config = config
        self.notify = notify
        self.run_judges = run_judges
        self.watch = watch
        self.feedback_file = feedback_file
        self.inbox: queue.Queue[InboxMessage] = queue.Queue()
        self.queue = FairQueue()
        self.custody = Custody(workspace)
        self.judges: list[JudgeClient] = []
        self.rung_counts: dict[int, int] = {}
        self.lost: dict[int, int] = {}  # evaluation -> times its remote judge was lost with it
        self.paths: dict[int, Path] = {}
        self.ignored_said: set[Path] = set()
        self.store: Store | None = None
        self.watcher: WorkspaceWatcher | None = None
        self.thread = threading.Thread(target=self._loop, name="kerneltui-scheduler", daemon=True)
        self.stopped = threading.Event()
        self.started = threading.Event()
        self.lock: JudgeLock | None = None
        self.owner = False

    # --- called from any thread ---------------------------------------------------------------

    def start(self) -> None:
        self.thread.start()

    def enqueue(self, path: Path, force: bool = False) -> None:
        self.inbox.put(Enqueue(path, force))

    def accept_problem(self, problem: str, digest: str) -> None:
        """The person accepts the problem's changed files they were shown (their digest): judged against from now."""
        self.inbox.put(AcceptProblem(problem, digest))

    def ask(self, path: Path, kind: AskedKind) -> None:
        """Queues the version to be judged as asked: a profile (Nsight Compute, recorded beside its evaluation) or
        a sanitize (the ladder and compute-sanitizer's tools)."""
        self.inbox.put(Asked(path, kind))

    def stop(self) -> None:
        if self.thread.is_alive():
            self.inbox.put(Stop())
            self.thread.join(timeout=15)

    def judge_states(self) -> list[dict[str, Any]]:
        """Each judge as the dashboard's GPUs view shows it (read from another thread: a moment's staleness is fine)."""
        return [judge_state(j) for j in list(self.judges)]

    @property
    def pending(self) -> int:
        return len(self.queue) + sum(len(j.in_flight) for j in self.judges)

    # --- the scheduler's own thread -----------------------------------------------------------

    def _loop(self) -> None:
        opened = Store.open(self.workspace.db_path, check=False)
        self.store = opened.store
        if opened.warning:
            self.notify(SchedulerEvent("warning", data={"message": opened.warning}))
        self.lock = JudgeLock(self.workspace.state / "judge.lock")
        self.owner = self.lock.acquire()
        if not self.owner:  # another kerneltui judges this workspace: its results show here through the history
            self.run_judges = self.watch = False
            self.notify(SchedulerEvent("deferred", data={"pid": self.lock.holder()}))
        else:
            self._requeue_interrupted()
            self._scan()
        if self.run_judges:
            self._start_judges()
        if self.watch:
            self.watcher = WorkspaceWatcher(
                self.workspace.root,
                ready=lambda p: self.inbox.put(Enqueue(p)),
                gone=lambda p: self.inbox.put(Deleted(p)),
                on_problem=lambda p: self.inbox.put(ProblemSeen(p)),
                debounce=self.config.debounce,
                on_ignored=lambda p: self.inbox.put(Ignored(p)),
            )
            self.watcher.start()
        self.started.set()
        self._dispatch()
        problem = self.store.integrity()  # the full scan the dashboard skipped at start-up
        if problem:
            self.notify(
                SchedulerEvent(
                    "warning",
                    data={
                        "message": f"{self.workspace.db_path} fails SQLite's integrity check ({problem}); "
                        "copy it aside and start a new one if results look wrong"
                    },
                )
            )
        while True:
            message = self.inbox.get()
            if isinstance(message, Stop):
                break
            try:
                self._handle(message)
                self._dispatch()
            except Exception as exc:  # one bad event must not stop the queue
                self.notify(SchedulerEvent("warning", data={"message": f"scheduler: {type(exc).__name__}: {exc}"}))
        self._shutdown()

    def _handle(self, message: InboxMessage) -> None:
        match message:
            case Enqueue(path, force) if self.owner:  # else the judging kerneltui's watcher sees the file
                self._enqueue(Path(path), force=force)
            case JudgeSaid(judge, generation, line) if generation == judge.generation:
                self._judge_line(judge, line)
            case JudgeEnded(judge, generation, code) if generation == judge.generation:
                self._judge_exit(judge, code)
            case JudgeLost(judge, generation, reason) if generation == judge.generation:
                self._judge_lost(judge, reason)
            case Deleted(path):
                self._deleted(Path(path))
            case ProblemSeen(path):
                self._problem(Path(path))
            case Ignored(path):
                self._ignored(Path(path))
            case AcceptProblem(problem, digest):
                self._accept(problem, digest)
            case Asked(path, kind) if self.owner:
                self._enqueue(Path(path), force=True, kind=kind)

    def _start_judges(self) -> None:
        (self.workspace.state / "logs").mkdir(parents=True, exist_ok=True)
        try:
            self.judges = make_judges(self.config, self.workspace, self.inbox.put)
        except RemoteError as exc:
            self.notify(SchedulerEvent("warning", data={"message": f"no judge started: {exc}"}))
            return
        for judge in self.judges:
            judge.start()

    def _dispatch(self) -> None:
        assert self.store is not None
        for judge in self.judges:
            while judge.has_room and self.queue:
                evaluation_id = self.queue.popleft()
                taken = self._take(evaluation_id)
                if taken is None:
                    continue
                row, path, staged = taken
                try:
                    judge.submit(
                        evaluation_id,
                        staged,
                        self.store.best_request(row["problem"]),
                        rungs_asked(row, self.config.options.rungs),
                        f"{row['problem']}/{row['version']}",
                    )
                except OSError:  # it died after saying ready: its exit event restarts it; the version waits
                    judge.ready = False
                    self.queue.appendleft(evaluation_id, row["problem"])
                    self.paths[evaluation_id] = path
                    break
                self.rung_counts[evaluation_id] = 0
                if judge.capacity == 1:  # judged now; a judge given several says when it starts each
                    self._started(judge, evaluation_id)

    def _started(self, judge: JudgeClient, evaluation_id: int) -> None:
        assert self.store is not None
        row = self.store.evaluation(evaluation_id) or {}
        judge.started.add(evaluation_id)
        self.store.set_running(evaluation_id)
        self.notify(
            SchedulerEvent("started", evaluation_id, row.get("problem"), row.get("version"), {"judge": judge.index})
        )

    def _judge_line(self, judge: JudgeClient, line: str) -> None:
        assert self.store is not None
        event = protocol.parse(line)
        if isinstance(event, protocol.Ready):
            judge.ready, judge.device = True, event.device
            self.notify(SchedulerEvent("judge", data={"judge": judge.index, "device": judge.device}))
        elif isinstance(event, protocol.Started):
            if judge.capacity > 1 and event.id in judge.in_flight:
                self._started(judge, event.id)
        elif not isinstance(event, (protocol.RungFinished, protocol.Finished, protocol.Failed)) or not isinstance(
            event.id, int
        ):
            return
        elif isinstance(event, protocol.RungFinished):
            index = self.rung_counts.get(event.id, 0)
            self.rung_counts[event.id] = index + 1
            record_event(self.store, event.id, event, index)
            self.notify(SchedulerEvent("rung", event.id, data={"rung": event.rung.name, "ok": event.rung.ok}))
        elif isinstance(event, protocol.Finished):
            self.custody.unstage(event.id)
            refused = judged_other_bytes(self.store, event.id, event.evaluation)
            if refused:
                judge.done(event.id)
                self._not_judged(event.id, refused)
                return self._maybe_idle()
            record_event(self.store, event.id, event, 0)
            judge.done(event.id)
            judge.judged += 1
            self._finished(event.id, event.evaluation)
        else:
            self._failed(judge, event.id, event)

    def _failed(self, judge: JudgeClient, evaluation_id: int, event: protocol.Failed) -> None:
        assert self.store is not None
        self.custody.unstage(evaluation_id)
        record_event(self.store, evaluation_id, event, 0)
        if event.problem:
            row = self.store.evaluation(evaluation_id)
            if row:
                self.store.set_problem_error(row["problem"], event.error)
        judge.done(evaluation_id)
        self._feedback(evaluation_id)
        self.notify(SchedulerEvent("failed", evaluation_id, data={"error": event.error}))
        self._maybe_idle()

    def _finished(self, evaluation_id: int, evaluation: Evaluation) -> None:
        assert self.store is not None
        row = self.store.evaluation(evaluation_id) or {}
        beat_best = beat_best_of(row)
        if evaluation.error is None and not evaluation.failed_rung:
            self.store.set_problem_error(evaluation.problem, None)
        self._feedback(evaluation_id)
        self.notify(
            SchedulerEvent(
                "finished",
                evaluation_id,
                evaluation.problem,
                evaluation.version,
                {
                    "status": evaluation.status,
                    "beat_best": beat_best,
                    "flags": [flag.name for flag in evaluation.flags],
                    "vs_best": row.get("vs_best"),
                    "race": row.get("race"),
                    "median_us": row.get("median_us"),
                    "speedup": row.get("speedup"),
                },
            )
        )
        self._maybe_idle()

    def _feedback(self, evaluation_id: int | None) -> None:
        said = feedback_file_for(self.store, self.workspace.root, evaluation_id) if self.feedback_file else None
        if said:
            self.notify(SchedulerEvent("warning", data={"message": said}))

    def _maybe_idle(self) -> None:
        if not self.queue and all(not j.in_flight for j in self.judges):
            self.notify(SchedulerEvent("idle"))

    def _shutdown(self) -> None:
        self.stopped.set()
        if self.watcher:
            self.watcher.stop()
        for judge in self.judges:
            judge.stop()
        if self.store:
            self.store.close()
        if self.lock:
            self.lock.release()


def judge_state(judge: JudgeClient) -> dict[str, Any]:
    """Where the judge runs, its device, what it judges now and how many it judged."""
    return {
        "judge": judge.index,
        "where": judge.where,
        "device": (judge.device or {}).get("name"),
        "ready": judge.ready,
        "busy": busy_label(judge),
        "judged": judge.judged,
    }


def busy_label(judge: JudgeClient) -> str | None:
    """What the judge has in hand: the first version sent, and how many more wait in it (None: nothing)."""
    labels = list(judge.in_flight.values())
    if not labels:
        return None
    return labels[0] + (f" (+{len(labels) - 1})" if len(labels) > 1 else "")


def feedback_file_for(store: Store | None, root: Path, evaluation_id: int | None) -> str | None:
    """FEEDBACK.md beside the versions, for agents that read files rather than speak a protocol; what went wrong
    writing it, if anything (a read-only or vanished folder: the history has it all anyway)."""
    row = store.evaluation(evaluation_id) if store is not None and evaluation_id is not None else None
    if row:
        try:
            write_feedback(store, root / row["problem"])  # type: ignore[arg-type]
        except OSError as exc:
            return f"feedback file: {exc}"
    return None


def beat_best_of(row: dict[str, Any]) -> bool:
    """Raced back to back, only a win beyond the noise counts; with no race, a median below the best's."""
    if row.get("race"):
        return bool(row["race"] == "faster")
    return bool(row.get("vs_best") and row["vs_best"] > 1.0)


def rungs_asked(row: dict[str, Any], configured: tuple[str, ...]) -> tuple[str, ...] | None:
    """A queued profile's rungs, a sanitize's (the `configured` ladder and the sanitize rung); None for an
    evaluation (the judge's own rungs)."""
    try:
        kind = json.loads(row.get("options") or "{}").get("kind")
    except (ValueError, AttributeError):
        return None
    if kind == "sanitize":
        return parse_rungs([*configured, "sanitize"])
    return PROFILE_RUNGS if kind == "profile" else None


class JudgeLock:
    """One kerneltui judges a workspace at a time (two would race for the same files and the same GPU).

    An advisory lock on a file in the state folder, held for the process's life and released by the
    kernel when it exits, however it exits. The file holds the holder's pid, for the message.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd
        return True

    def holder(self) -> int | None:
        try:
            return int(self.path.read_text().strip() or 0) or None
        except (OSError, ValueError):
            return None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
