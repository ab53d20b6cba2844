"""What reaches the queue: problems and versions found on disk (at start and as files change), versions
deleted, versions broken by a problem.py that now reads well judged again. Runs on the scheduler's thread."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.contract.source import VersionTooLarge, defines
from kerneltui.core.config import LadderConfig
from kerneltui.core.judging.custody import Custody, CustodyError, Noticed, accept, notice, stage_evaluation
from kerneltui.core.judging.events import SchedulerEvent
from kerneltui.core.judging.fair_queue import FairQueue
from kerneltui.core.judging.runner import record_refusal, record_version
from kerneltui.core.workspace import Workspace, ignored_version
from kerneltui.history.store import Store

PROBLEM_NAMES = ("reference", "make_inputs", "cases", "bench_cases", "tolerance", "cost")


class Intake:
    """The scheduler's side that turns files into queued evaluations (the Scheduler sets these)."""

    store: Store | None
    workspace: Workspace
    config: LadderConfig
    queue: FairQueue
    custody: Custody
    paths: dict[int, Path]
    notify: Callable[[SchedulerEvent], None]
    ignored_said: set[Path]  # files named like versions that are not, already said

    def _scan(self) -> None:
        """Versions written while kerneltui was not running are queued; vanished ones marked deleted."""
        assert self.store is not None
        stamps = self.store.judged_file_stamps()
        for folder in self.workspace.problems():
            self._problem(folder, announce=False)
            for path in sorted(folder.glob("[vV]*.py")):
                if ignored_version(path):
                    self._ignored(path)
            for path in self.workspace.versions(folder.name):
                try:
                    stat = path.stat()
                except OSError:
                    continue
                if stamps.get(str(path)) != (stat.st_size, stat.st_mtime_ns):
                    self._enqueue(path, force=False, announce=False)
        for row in self.store.present_versions():
            if not Path(row["path"]).exists():
                self.store.mark_deleted(row["problem"], row["name"])
        self.notify(SchedulerEvent("scan", data={"queued": len(self.queue)}))

    def _problem(self, folder: Path, announce: bool = True) -> None:
        """A problem folder seen or changed: its files compared with the accepted ones (a change waits for the
        person's acceptance, shown as a diff); the accepted problem.py read for what it lacks."""
        assert self.store is not None
        if not (folder / "problem.py").is_file():
            return
        from harness.contract.source import notes

        if self.store.problem_digests(folder.name) == (None, None):
            self.store.ensure_problem(folder.name, str(folder))
        try:
            noticed = notice(self.store, self.custody, folder)
        except (CustodyError, OSError) as exc:
            self.notify(SchedulerEvent("warning", data={"message": f"{folder.name}: {exc}"}))
            return
        if noticed.pending:
            if not noticed.shown or not announce:  # said once per change, and again at each start
                self._changed(folder.name, noticed)
            return
        text = (
            (self.custody.problem_files(folder.name, noticed.accepted) or {})
            .get("problem.py", b"")
            .decode(errors="replace")
        )
        error = problem_error(text)
        self.store.ensure_problem(folder.name, str(folder), notes(text))
        self.store.set_problem_error(folder.name, error)
        if announce:
            self.notify(SchedulerEvent("problem", problem=folder.name, data={"error": error}))
        if announce and error is None:
            self._rejudge(folder.name, stale=self.config.rejudge_stale)

    def _changed(self, problem: str, noticed: Noticed) -> None:
        """Files of the problem changed on disk: shown to the person, not judged against until they accept them."""
        assert noticed.pending is not None
        diff = self.custody.diff(problem, noticed.accepted, self.custody.problem_files(problem, noticed.pending) or {})
        message = (
            f"{problem}: its files changed on disk and are not judged against until accepted "
            f"(A in the dashboard shows the change, or kerneltui accept-problem {problem})"
        )
        self.notify(SchedulerEvent("problem-changed", problem=problem, data={"digest": noticed.pending, "diff": diff}))
        self.notify(SchedulerEvent("warning", data={"message": message}))

    def _requeue_interrupted(self) -> None:
        """Evaluations a kerneltui that stopped left queued or running: queued again, staged again."""
        assert self.store is not None
        for evaluation_id in self.store.requeue_interrupted():
            self.custody.unstage(evaluation_id)
            self.queue.append(evaluation_id, self._problem_of(evaluation_id))

    def _problem_of(self, evaluation_id: int) -> str:
        assert self.store is not None
        return str((self.store.evaluation(evaluation_id) or {}).get("problem", ""))

    def _take(self, evaluation_id: int) -> tuple[dict[str, Any], Path, Path] | None:
        """A queued evaluation handed out: (its row, its version file, the file the judge gets: the bytes recorded
        beside the accepted problem, not the file as it is now). None when it cannot be judged (said and recorded)."""
        assert self.store is not None
        row = self.store.evaluation(evaluation_id)
        found = self.store.version_path(row["version_id"]) if row else None
        path = self.paths.pop(evaluation_id, None) or (Path(found) if found else None)
        if row is None or path is None or not path.is_file():
            self._not_judged(evaluation_id, "the version file is gone")
            return None
        try:
            return row, path, stage_evaluation(self.store, self.custody, evaluation_id, row)
        except (CustodyError, OSError) as exc:
            self._not_judged(evaluation_id, f"not judged: {exc}")
            return None

    def _not_judged(self, evaluation_id: int, reason: str) -> None:
        assert self.store is not None
        self.store.fail_evaluation(evaluation_id, reason, status="error")
        self.notify(SchedulerEvent("failed", evaluation_id, data={"error": reason}))

    def _accept(self, problem: str, digest: str) -> None:
        """The person's acceptance of a problem's changed files: judged against from now; the versions its change
        broke judged again (every version judged against the earlier files, with rejudge_stale)."""
        assert self.store is not None
        try:
            accepted = accept(self.store, self.custody, problem, digest)
        except (CustodyError, OSError) as exc:
            self.notify(SchedulerEvent("warning", data={"message": f"{problem}: not accepted: {exc}"}))
            return
        self.store.set_problem_error(problem, None)
        folder = self.workspace.root / problem
        self._problem(folder)  # its error, if any, as it reads now; and anything changed since it was shown
        if accepted is not None:
            self.notify(SchedulerEvent("accepted", problem=problem, data={"stale": accepted.stale}))

    def _ignored(self, path: Path) -> None:
        """A file named like a version that is not one: said once per file, with the name it needs."""
        if path in self.ignored_said:
            return
        self.ignored_said.add(path)
        digits = re.match(r"\d+", path.stem[1:])
        number = f"{int(digits.group()):03d}" if digits else "NNN"
        message = f"{path.parent.name}/{path.name} is not judged: versions are named vNNN.py (e.g. v{number}.py)"
        self.notify(SchedulerEvent("warning", data={"message": message}))

    def _rejudge(self, problem: str, stale: bool) -> None:
        """problem.py changed and reads well: versions it broke (status error) are judged again, and with
        `stale` every version judged against an older problem.py."""
        assert self.store is not None
        for row in self.store.version_rows(problem):
            wanted = row.get("status") == "error" or (stale and row.get("stale"))
            if wanted and not row.get("deleted") and row.get("path"):
                self._enqueue(Path(row["path"]), force=True)

    def _enqueue(self, path: Path, force: bool, announce: bool = True, kind: str | None = None) -> None:
        assert self.store is not None
        if not path.is_file():
            return
        try:
            version_id, digest, problem = record_version(self.store, self.workspace, path)
        except VersionTooLarge as exc:
            record_refusal(self.store, path, str(exc))
            self.notify(SchedulerEvent("warning", data={"message": f"{path.parent.name}/{exc}"}))
            return
        self.store.mark_present(problem, path.stem)
        if self.store.was_judged(version_id) and not force:
            return
        options = {"kind": kind} if kind else None  # a profile sits beside the version's evaluation
        evaluation_id = self.store.start_evaluation(version_id, problem, path.stem, digest, options, status="queued")
        self.queue.append(evaluation_id, problem)
        self.paths[evaluation_id] = path
        if announce:
            self.notify(SchedulerEvent("queued", evaluation_id, problem, path.stem))

    def _deleted(self, path: Path) -> None:
        assert self.store is not None
        self.store.mark_deleted(path.parent.name, path.stem)
        self.notify(SchedulerEvent("deleted", problem=path.parent.name, version=path.stem))


def problem_error(text: str) -> str | None:
    """What a problem.py lacks for judging (read, not run), or None."""
    from harness.contract.source import parse

    if parse(text) is None:
        return "problem.py does not parse (SyntaxError)"
    missing = [name for name in PROBLEM_NAMES if not defines(text, name)]
    if "tolerance" in missing and defines(text, "check"):
        missing.remove("tolerance")  # the problem's check is the verdict
    return f"problem.py is missing {', '.join(missing)}" if missing else None
