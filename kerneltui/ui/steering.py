"""What the person does to versions: verdicts, guidance, diffs and search, judging again and accepting problems."""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from textual.app import SuspendNotSupported
from textual.widgets import Input, TabbedContent

from harness.contract.results import AskedKind
from kerneltui.core.judging.custody import pending_change
from kerneltui.core.session import SessionRefused
from kerneltui.core.verdicts import approval_doubt
from kerneltui.ui.base import DashboardBase
from kerneltui.ui.line_comments import LineComments
from kerneltui.ui.panes import ScreenView
from kerneltui.ui.screens.dialogs import ConfirmScreen, RejectScreen
from kerneltui.ui.screens.problem_change import ProblemChangeScreen
from kerneltui.ui.screens.source import SourceScreen
from kerneltui.ui.widgets.asm import AsmPane
from kerneltui.ui.widgets.diff import DiffPane, targets_of
from kerneltui.ui.widgets.problems import ProblemTable
from kerneltui.ui.widgets.versions import VersionTable

SEARCH_PROMPT = "search (a regular expression)"
FILTER_PROMPT = "filter the problems: a part of their names (empty: all), Enter applies"


class Steering:
    """The keys that act on the highlighted version or problem, for the app it is part of (its actions hand
    them here); `view` says what is highlighted and reads the history again after a change."""

    def __init__(self, app: DashboardBase, view: ScreenView, comments: LineComments) -> None:
        self.app = app
        self.view = view
        self.comments = comments
        self.filtering = False  # the search box, opened on the problems list, filters it

    def selected_version(self) -> dict[str, Any] | None:
        if not self.view.showing_highlighted():
            return None
        row = self.app.query_one("#versions", VersionTable).selected
        if row is None:
            self.app.notify("no version selected", severity="warning")
        return row

    def approve(self) -> None:
        row = self.selected_version()
        if row is None:
            return
        doubt = approval_doubt(row)
        if doubt is None:
            self.record_verdict(row, "approved", None)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.record_verdict(row, "approved", None)

        self.app.push_screen(ConfirmScreen(f"{row['name']} {doubt}. Approve it anyway? y / n"), answered)

    def source(self) -> None:
        """The selected version's source as it was judged (the file may have changed since)."""
        row = self.selected_version()
        if row is None:
            return
        if self.app.detail is None or self.app.detail.version.get("name") != row["name"]:
            self.app.notify("its source is still loading: press v again", timeout=3)
            return
        title = f" {row['name']}  {row.get('path') or ''}   (as judged; ↑/↓ shift+↑/↓ then C comments; Esc closes)"
        source = self.app.detail.source
        where = Path(str(row.get("path") or f"{row['name']}.py")).name

        def closed(chosen: tuple[int, int] | None) -> None:
            if chosen is not None:
                self.comments.wait(str(row["name"]), where, source.splitlines(), chosen)

        self.app.push_screen(SourceScreen(title, source), closed)

    def edit(self) -> None:
        """The selected version's file in $EDITOR (or $VISUAL), the dashboard suspended meanwhile."""
        row = self.selected_version()
        if row is None or not row.get("path"):
            return
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if not editor:
            self.app.notify("set $EDITOR (or $VISUAL) to open versions in an editor", severity="warning")
            return
        try:
            with self.app.suspend():
                subprocess.run([*shlex.split(editor), str(row["path"])], check=False)
        except SuspendNotSupported:
            self.app.notify("this terminal cannot be handed to an editor (a web view?)", severity="warning")
        except OSError as exc:
            self.app.notify(f"{editor}: {exc.strerror}", severity="error")

    def undo_verdict(self) -> None:
        problem = self.app.snapshot.problem
        if problem and self.view.showing_highlighted():
            self.withdraw_verdict(problem)

    def withdraw_verdict(self, problem: str) -> None:
        def withdraw() -> None:
            if self.app.session.withdraw_verdict(problem) is None:
                self.app.call_from_thread(self.app.notify, f"no verdict to undo in {problem}", timeout=4)

        self.app.run_worker(withdraw, thread=True, group="write", exit_on_error=False)

    def reject(self) -> None:
        row = self.selected_version()
        if row is None:
            return

        def rejected(reason: str | None) -> None:
            if reason is not None:
                self.record_verdict(row, "rejected", reason)

        self.app.push_screen(RejectScreen(row["name"]), rejected)

    def record_verdict(self, row: dict[str, Any], verdict: str, reason: str | None) -> None:
        record = functools.partial(self.app.session.record_verdict, row, verdict, reason)
        self.app.run_worker(record, thread=True, group="write", exit_on_error=False)

    def record_guidance(self, problem: str, text: str) -> None:
        record = functools.partial(self.app.session.record_guidance, problem, text)
        self.app.run_worker(record, thread=True, group="write", exit_on_error=False)

    def recorded(self, what: str, text: str) -> None:
        """What the session recorded (a verdict, guidance, its delivery), said; the history read again."""
        if what in ("delivery", "warning"):
            self.app.notify(text, severity=what, timeout=6, markup=False)  # type: ignore[arg-type]
            return
        if what == "history":  # the old file was moved aside: a new one is read
            self.app.notify(text, severity="warning", timeout=15, markup=False)
            self.view.load_snapshot()
            return
        self.app.notify(text if what == "verdict" else f"guidance sent: {text}", timeout=4, markup=False)
        self.view.load_snapshot()

    def rewind(self) -> None:
        """The problem's agent told to continue from the selected version (its source quoted)."""
        row, detail = self.selected_version(), self.app.detail
        if row is None or detail is None or detail.version.get("name") != row["name"]:
            return
        problem = self.app.snapshot.problem or ""
        record = functools.partial(self.app.session.record_rewind, problem, dict(row), detail.source)
        self.app.run_worker(record, thread=True, group="write", exit_on_error=False)

    def guide(self) -> None:
        self.comments.drop()
        self.app.query_one("#guidance", Input).focus()

    def guidance_submitted(self, box: Input, value: str) -> None:
        text = self.comments.finish(value.strip()) if value.strip() else ""
        problem = self.app.snapshot.problem
        if not text or not self.view.showing_highlighted():
            return
        if problem is None:
            self.app.notify("no problem selected", severity="warning")
            return
        box.value = ""
        self.record_guidance(problem, text)  # kept even when typed at quit: the stores close after this
        if self.app.is_running:
            self.app.query_one("#versions").focus()  # back to reviewing: a, r, j, k work again

    def diff(self) -> None:
        tabs = self.app.query_one("#detail", TabbedContent)
        if tabs.active == "diff":
            self.app.query_one("#diff-view", DiffPane).cycle(targets_of(self.app.detail))
        tabs.active = "diff"
        self.view.show_diff()

    def mark(self) -> None:
        """Marks the selected version (again: unmarks it); the Diff pane then shows others against it."""
        if not self.view.showing_highlighted():
            return
        row = self.app.query_one("#versions", VersionTable).selected
        if row is None:
            self.app.notify("no version selected to mark", severity="warning")
            return
        if self.app.marked is not None and self.app.marked["version_id"] == row["version_id"]:
            self.app.marked = None
            self.app.notify(f"{row['name']} unmarked")
        else:
            self.app.marked = {"version_id": row["version_id"], "name": row["name"]}
            self.app.query_one("#diff-view", DiffPane).target = "marked"
            self.app.notify(f"{row['name']} marked: select another version to see it against {row['name']} (Diff)")
        self.view.load_detail(row)

    def tab(self, tab: str) -> None:
        self.app.query_one("#detail", TabbedContent).active = tab

    def search(self) -> None:
        box = self.app.query_one("#search-box", Input)
        problems = self.app.query_one("#problems", ProblemTable)
        no_version = self.app.query_one("#versions", VersionTable).selected is None
        # on the problems list, or with no version to search in (a fresh dashboard of many problems): a filter
        self.filtering = self.app.focused is problems or (no_version and len(problems.rows_all) > 1)
        if self.filtering:
            box.placeholder, box.value = FILTER_PROMPT, problems.filter_text
            box.display = True
            box.focus()
            return
        box.placeholder = SEARCH_PROMPT
        if self.view.active_view() is None:
            self.app.notify("nothing to search in this pane", severity="warning")
            return
        box.display = True
        box.focus()

    def search_submitted(self, box: Input, value: str) -> None:
        box.display = False
        if self.filtering:
            self.filtering = False
            self.filter_problems(value)
            return
        view = self.view.active_view()
        if view is None:
            return
        count = view.search(value)
        view.focus()
        self.app.notify(view.match_label() or "search cleared", timeout=3, markup=False)
        if self.app.query_one("#detail", TabbedContent).active == "asm":
            self.app.query_one("#asm-pane", AsmPane).update_bar()
        if not count and value:
            self.app.bell()

    def filter_problems(self, text: str) -> None:
        """The problems list narrowed to the names holding `text`; the first of them shown if the problem shown
        is not among them."""
        problems = self.app.query_one("#problems", ProblemTable)
        left = problems.set_filter(text)
        problems.focus()
        if not text.strip():
            self.app.notify(f"problems: all {len(left)}", timeout=3)
            return
        self.app.notify(f"problems: {len(left)} of {len(problems.rows_all)} hold {text.strip()!r}", timeout=3)
        if left and self.app.snapshot.problem not in left:
            self.app.select_problem(left[0])
            self.view.load_snapshot()  # the cursor may sit on it already: no highlight says so
        elif not left:
            self.app.bell()

    def profile(self) -> None:
        self._ask("profile", "queued for a profile (Nsight Compute; shown with its rungs)")

    def sanitize(self) -> None:
        self._ask("sanitize", "queued to be judged again under compute-sanitizer")

    def _ask(self, kind: AskedKind, queued: str) -> None:
        row = self.selected_version()
        if row is None:
            return
        try:
            self.app.session.ask(Path(row["path"]), kind)
        except SessionRefused as exc:
            self.app.notify(str(exc), severity="error")
            return
        self.app.notify(f"{row['name']} {queued}", timeout=4, markup=False)

    def rebench(self) -> None:
        row = self.selected_version()
        if row is None:
            return
        try:
            self.app.session.judge_again(Path(row["path"]))
        except SessionRefused as exc:
            self.app.notify(str(exc), severity="error")
            return
        self.app.notify(f"{row['name']} queued to be judged again", timeout=3)

    def rejudge_stale(self) -> None:
        """Every version of the problem judged against an older problem.py, judged again (rows in hand: the
        snapshot the table shows)."""
        if not self.view.showing_highlighted():
            return
        stale = [r for r in self.app.snapshot.versions if r.get("stale") and r.get("path") and not r.get("deleted")]
        if not stale:
            self.app.notify("no version here was judged against an older problem.py", timeout=4)
            return
        try:
            for row in stale:
                self.app.session.judge_again(Path(row["path"]))
        except SessionRefused as exc:
            self.app.notify(str(exc), severity="error")
            return
        self.app.notify(f"{len(stale)} stale version(s) queued to be judged again", timeout=4)

    def accept_problem(self) -> None:
        """The selected problem's files changed on disk: their diff against the accepted ones, accepted with y."""
        problem = self.app.snapshot.problem
        if not self.view.showing_highlighted() or problem is None:
            return
        change = pending_change(self.app.workspace, problem)
        if change is None:
            self.app.notify(f"{problem}: its files on disk are the accepted ones", timeout=4, markup=False)
            return
        digest, diff = change

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            if self.app.session.scheduler is None:
                self.app.notify("judging is off in this session: kerneltui accept-problem accepts it", severity="error")
                return
            self.app.session.scheduler.accept_problem(problem, digest)
            self.app.notify(f"{problem}: changed files accepted; judged against from now", timeout=4, markup=False)

        self.app.push_screen(ProblemChangeScreen(problem, diff), answered)
