"""A version judged once, for `kerneltui eval`: recorded, judged by a judge of its own (kerneltui.core.judging.client),
its rungs written into the history as they arrive; and the rows a version file becomes.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.contract import protocol, source
from harness.contract.options import PER_RUN, Options
from harness.contract.results import Evaluation, RungResult
from kerneltui.core.config import LadderConfig
from kerneltui.core.judging.client import (
    JudgeClient,
    JudgeEnded,
    JudgeLost,
    JudgeMessage,
    LocalProcess,
    harness_python,
    record_event,
)
from kerneltui.core.judging.custody import Custody, CustodyError, judged_other_bytes, notice, stage_evaluation
from kerneltui.core.judging.judges import make_judges
from kerneltui.core.workspace import Workspace, WorkspaceError
from kerneltui.history.store import Store

STDERR_TAIL = 3000
MAX_VERSION_BYTES = int(source.MAX_VERSION_KB * 1024)


@dataclass
class Outcome:
    evaluation_id: int
    evaluation: Evaluation | None = None
    problem_error: str | None = None
    error: str | None = None
    rungs: list[RungResult] = field(default_factory=list)
    note: str | None = None  # said beside the result: judged against the accepted problem, not a change on disk


def record_version(store: Store, workspace: Workspace, path: Path, author: str = "") -> tuple[int, str, str]:
    """Problem and version rows for a file, from its bytes now, which are kept; returns (version_id, hash, problem).
    A file past the size limit raises VersionTooLarge: nothing of it is read whole or stored."""
    stat = path.stat()
    data = source.read_version(path, MAX_VERSION_BYTES)
    digest = Custody(workspace).keep_source(data)  # these bytes, and no later ones, are what is judged
    problem_dir = path.parent
    if store.problem_digests(problem_dir.name) == (None, None):  # new here; later its accepted files say what it is
        problem_file = problem_dir / "problem.py"
        problem_text = problem_file.read_text(errors="replace") if problem_file.is_file() else ""
        store.ensure_problem(problem_dir.name, str(problem_dir), source.notes(problem_text))
    text = data.decode(errors="replace")
    version_id = store.ensure_version(
        problem_dir.name, path.stem, path, digest, source.notes(text), author, len(data), source=text
    )
    if stat.st_size == len(data):  # unchanged while read: the stamp describes these bytes
        store.set_file_stamp(version_id, stat.st_size, stat.st_mtime_ns)
    return version_id, digest, problem_dir.name


def record_refusal(store: Store, path: Path, reason: str) -> int:
    """A version refused unread (too large): a row saying so, with its size and hash but not its text."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    problem = path.parent.name
    store.ensure_problem(problem, str(path.parent), "")
    version_id = store.ensure_version(problem, path.stem, path, digest.hexdigest(), "", "", path.stat().st_size)
    evaluation_id = store.start_evaluation(version_id, problem, path.stem, digest.hexdigest())
    ev = Evaluation(problem=problem, version=path.stem, path=str(path), hash=digest.hexdigest())
    ev.rungs.append(RungResult(name="load", ok=False, err=reason))
    ev.finish()
    store.finish_evaluation(evaluation_id, ev)
    return evaluation_id


def start_evaluation(
    store: Store, workspace: Workspace, path: Path, options: Options, kind: str | None
) -> tuple[int, str]:
    """The file recorded and its evaluation started: (evaluation id, problem)."""
    version_id, digest, problem = record_version(store, workspace, path)
    # a profile (kind "profile") sits beside the version's evaluation rather than replacing it in the history
    asked = {k: v for k, v in vars(options).items() if k not in PER_RUN} | ({"kind": kind} if kind else {})
    return store.start_evaluation(version_id, problem, path.stem, digest, asked), problem


def evaluate(
    store: Store,
    workspace: Workspace,
    path: Path,
    options: Options,
    python: str | None = None,
    on_rung: Callable[[RungResult], None] | None = None,
    kind: str | None = None,
    ladder: LadderConfig | None = None,
) -> Outcome:
    """Records the file, judges it in a judge of its own (the scheduler's kind, for this one request: a local
    process, or the first judge of the remote executor `ladder` names) and records everything as it streams in."""
    path = path.resolve()
    evaluation_id, problem = start_evaluation(store, workspace, path, options, kind)
    outcome = Outcome(evaluation_id)
    staged = _staged(store, workspace, outcome)
    if staged is None:
        return outcome
    said: queue.Queue[JudgeMessage] = queue.Queue()
    if ladder is not None and ladder.executor != ["local"]:
        judge = make_judges(ladder.model_copy(update={"options": options}), workspace, said.put)[0]
    else:
        judge = JudgeClient(0, LocalProcess(python or harness_python(), options, workspace.state, once=True), said.put)
    judge.start()
    try:
        _converse(
            judge,
            said,
            outcome,
            lambda: judge.submit(evaluation_id, staged, store.best_request(problem)),
            lambda event: _handle_event(store, outcome, event, on_rung),
            options.timeout * 20 + 600,
        )
    except BaseException:
        judge.stop(grace=0)
        store.fail_evaluation(evaluation_id, "interrupted", status="error")
        raise
    judge.stop(grace=2)
    Custody(workspace).unstage(evaluation_id)
    if outcome.error is None and outcome.evaluation is None and outcome.problem_error is None:
        outcome.error = f"the judge on {judge.where} ended without a result: {judge.stderr_tail(STDERR_TAIL)}"
    if outcome.error:
        store.fail_evaluation(evaluation_id, outcome.error, status="error")
    return outcome


def _converse(
    judge: JudgeClient,
    said: queue.Queue[JudgeMessage],
    outcome: Outcome,
    submit: Callable[[], None],
    handle: Callable[[protocol.JudgeEvent | None], bool],
    patience_s: float,
) -> None:
    """The request submitted once the judge is ready, then its events handled until the evaluation is over, the
    judge ends or is lost (said in outcome.error), or it says nothing for `patience_s`."""
    while True:
        try:
            message = said.get(timeout=patience_s)
        except queue.Empty:
            outcome.error = f"no answer from the judge on {judge.where} in {patience_s:.0f} s"
            return
        if isinstance(message, JudgeLost):
            outcome.error = f"the judge on {judge.where} was lost: {message.reason}"
            return
        if isinstance(message, JudgeEnded):
            code = message.code
            outcome.error = f"the judge exited (code {code}) without a result: {judge.stderr_tail(STDERR_TAIL)}"
            return
        event = protocol.parse(message.line)
        if isinstance(event, protocol.Ready):
            try:
                submit()
            except OSError:
                continue  # it died after saying ready: its end comes next and says why
        elif handle(event):
            return


def _staged(store: Store, workspace: Workspace, outcome: Outcome) -> Path | None:
    """The evaluation's recorded bytes beside the accepted problem, for the judge; None (the outcome's error said
    and recorded) when they cannot be."""
    custody = Custody(workspace)
    try:
        row = store.evaluation(outcome.evaluation_id) or {}
        notice(store, custody, workspace.problem_dir(str(row["problem"])))  # no watcher here: a change is seen now
        staged = stage_evaluation(store, custody, outcome.evaluation_id, row)
    except (CustodyError, OSError, WorkspaceError) as exc:
        outcome.error = f"not judged: {exc}"
        store.fail_evaluation(outcome.evaluation_id, outcome.error, status="error")
        return None
    if store.problem_digests(str(row["problem"]))[1]:
        outcome.note = (
            f"{row['problem']}'s files changed on disk and are not accepted: judged against the accepted ones "
            f"(kerneltui accept-problem {row['problem']} shows and accepts the change)"
        )
    return staged


def _handle_event(
    store: Store, outcome: Outcome, event: protocol.JudgeEvent | None, on_rung: Callable[[RungResult], None] | None
) -> bool:
    """Records one of the judge's events; True once the evaluation is over. Anything else on stdout is noise."""
    if event is None or getattr(event, "id", outcome.evaluation_id) != outcome.evaluation_id:
        return False
    if isinstance(event, protocol.Finished) and (
        refused := judged_other_bytes(store, outcome.evaluation_id, event.evaluation)
    ):
        event = protocol.Failed(refused, id=outcome.evaluation_id)
    record_event(store, outcome.evaluation_id, event, len(outcome.rungs))
    if isinstance(event, protocol.RungFinished):
        outcome.rungs.append(event.rung)
        if on_rung:
            on_rung(event.rung)
    elif isinstance(event, protocol.Finished):
        outcome.evaluation = event.evaluation
    elif isinstance(event, protocol.Failed):
        outcome.problem_error = event.error
    return isinstance(event, (protocol.Finished, protocol.Failed))
