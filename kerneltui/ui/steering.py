"""What the person does: verdicts, guidance, diffs and search, and agents started, stopped and answered."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import SuspendNotSupported
from textual.widgets import Input, TabbedContent

from kerneltui.core.agents.host import AgentRun
from kerneltui.core.judging.custody import pending_change
from kerneltui.core.session import SessionRefused
from kerneltui.core.verdicts import approval_doubt
from kerneltui.ui.base import while_running
from kerneltui.ui.messages import AgentFinished, PermissionAsked, RecordedMessage
from kerneltui.ui.panes import PaneLoading
from kerneltui.ui.screens.dialogs import ConfirmScreen, RejectScreen
from kerneltui.ui.screens.problem_change import ProblemChangeScreen
from kerneltui.ui.screens.source import SourceScreen
from kerneltui.ui.widgets.asm import AsmPane
from kerneltui.ui.widgets.diff import DiffPane, targets_of
from kerneltui.ui.widgets.versions import VersionTable


class Steering(PaneLoading):
    def selected_version(self) -> dict[str, Any] | None:
        if not self.showing_highlighted():
            return None
        row = self.query_one("#versions", VersionTable).selected
        if row is None:
            self.notify("no version selected", severity="warning")
        return row

    def action_approve(self) -> None:
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

        self.push_screen(ConfirmScreen(f"{row['name']} {doubt}. Approve it anyway? y / n"), answered)

    def action_source(self) -> None:
        """The selected version's source as it was judged (the file may have changed since)."""
        row = self.selected_version()
        if row is None:
            return
        if self.detail is None or self.detail.version.get("name") != row["name"]:
            self.notify("its source is still loading: press v again", timeout=3)
            return
        title = f" {row['name']}  {row.get('path') or ''}   (as judged; Esc closes, e opens it in $EDITOR)"
        self.push_screen(SourceScreen(title, self.detail.source))

    def action_edit(self) -> None:
        """The selected version's file in $EDITOR (or $VISUAL), the dashboard suspended meanwhile."""
        row = self.selected_version()
        if row is None or not row.get("path"):
            return
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if not editor:
            self.notify("set $EDITOR (or $VISUAL) to open versions in an editor", severity="warning")
            return
        try:
            with self.suspend():
                subprocess.run([*shlex.split(editor), str(row["path"])], check=False)
        except SuspendNotSupported:
            self.notify("this terminal cannot be handed to an editor (a web view?)", severity="warning")
        except OSError as exc:
            self.notify(f"{editor}: {exc.strerror}", severity="error")

    def action_undo_verdict(self) -> None:
        problem = self.snapshot.problem
        if problem and self.showing_highlighted():
            self.withdraw_verdict(problem)

    @work(thread=True, group="write", exit_on_error=False)
    def withdraw_verdict(self, problem: str) -> None:
        if self.session.withdraw_verdict(problem) is None:
            self.call_from_thread(self.notify, f"no verdict to undo in {problem}", timeout=4)

    def action_reject(self) -> None:
        row = self.selected_version()
        if row is None:
            return

        def rejected(reason: str | None) -> None:
            if reason is not None:
                self.record_verdict(row, "rejected", reason)

        self.push_screen(RejectScreen(row["name"]), rejected)

    @work(thread=True, group="write", exit_on_error=False)
    def record_verdict(self, row: dict[str, Any], verdict: str, reason: str | None) -> None:
        self.session.record_verdict(row, verdict, reason)

    @work(thread=True, group="write", exit_on_error=False)
    def record_guidance(self, problem: str, text: str) -> None:
        self.session.record_guidance(problem, text)

    @while_running
    def on_recorded_message(self, message: RecordedMessage) -> None:
        if message.what in ("delivery", "warning"):
            self.notify(message.text, severity=message.what, timeout=6, markup=False)  # type: ignore[arg-type]
            return
        if message.what == "history":  # the old file was moved aside: a new one is read
            self.notify(message.text, severity="warning", timeout=15, markup=False)
            self.load_snapshot()
            return
        self.notify(
            message.text if message.what == "verdict" else f"guidance sent: {message.text}", timeout=4, markup=False
        )
        self.load_snapshot()

    def action_guide(self) -> None:
        self.query_one("#guidance", Input).focus()

    @on(Input.Submitted, "#guidance")
    def guidance_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        problem = self.snapshot.problem
        if not text or not self.showing_highlighted():
            return
        if problem is None:
            self.notify("no problem selected", severity="warning")
            return
        event.input.value = ""
        self.record_guidance(problem, text)  # kept even when typed at quit: the stores close after this
        if self.is_running:
            self.query_one("#versions").focus()  # back to reviewing: a, r, j, k work again

    def action_diff(self) -> None:
        tabs = self.query_one("#detail", TabbedContent)
        if tabs.active == "diff":
            self.query_one("#diff-view", DiffPane).cycle(targets_of(self.detail))
        tabs.active = "diff"
        self._show_diff()

    def action_mark(self) -> None:
        """Marks the selected version (again: unmarks it); the Diff pane then shows others against it."""
        if not self.showing_highlighted():
            return
        row = self.query_one("#versions", VersionTable).selected
        if row is None:
            self.notify("no version selected to mark", severity="warning")
            return
        if self.marked is not None and self.marked["version_id"] == row["version_id"]:
            self.marked = None
            self.notify(f"{row['name']} unmarked")
        else:
            self.marked = {"version_id": row["version_id"], "name": row["name"]}
            self.query_one("#diff-view", DiffPane).target = "marked"
            self.notify(f"{row['name']} marked: select another version to see it against {row['name']} (Diff)")
        self.load_detail(row)

    def action_tab(self, tab: str) -> None:
        self.query_one("#detail", TabbedContent).active = tab

    def action_search(self) -> None:
        if self.active_view() is None:
            self.notify("nothing to search in this pane", severity="warning")
            return
        box = self.query_one("#search-box", Input)
        box.display = True
        box.focus()

    @on(Input.Submitted, "#search-box")
    @while_running
    def search_submitted(self, event: Input.Submitted) -> None:
        view = self.active_view()
        event.input.display = False
        if view is None:
            return
        count = view.search(event.value)
        view.focus()
        self.notify(view.match_label() or "search cleared", timeout=3, markup=False)
        if self.query_one("#detail", TabbedContent).active == "asm":
            self.query_one("#asm-pane", AsmPane).update_bar()
        if not count and event.value:
            self.bell()

    def action_start_agent(self) -> None:
        if self.snapshot.problem is None:
            self.notify("no problem selected", severity="warning")
            return
        if self.showing_highlighted():
            self.start_agent(self.snapshot.problem)

    def start_agent(self, problem: str) -> None:
        try:
            run = self.session.start_agent(problem, judged_elsewhere=bool(self.deferred_to))
        except SessionRefused as exc:
            self.notify(str(exc), severity="error", timeout=12, markup=False)
            return
        self.notify(f"{run.agent.model} started on {problem}", timeout=4, markup=False)
        self._update_status()
        self.run_agent_worker(run)

    @while_running
    def on_permission_asked(self, message: PermissionAsked) -> None:
        if self.config.bell:
            self.bell()
        self.notify(
            f"agent on {message.problem} asks: {message.ask.title}  (Agent pane: y allow once · a always · n deny)",
            timeout=15,
            markup=False,
        )
        self.load_snapshot()

    def _pending_ask(self) -> Any:
        tab = self.query_one("#detail", TabbedContent).active
        return self.asks.get(self.snapshot.problem or "") if tab == "agent" else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "permission":
            return self._pending_ask() is not None  # else the key does what it usually does
        return True

    def action_permission(self, kind: str) -> None:
        if self._pending_ask() is not None and self.session.answer_permission(self.snapshot.problem or "", kind):
            self.load_snapshot()

    def interrupt_agent(self) -> bool:
        """Esc on the Agent pane: ends the ACP agent's running turn so queued guidance goes now."""
        if not self.session.interrupt_agent(self.snapshot.problem or ""):
            return False
        self.notify("interrupting the agent's turn: queued guidance goes next", timeout=4)
        return True

    @work(thread=True, group="agents", exit_on_error=False)
    def run_agent_worker(self, run: AgentRun) -> None:
        self.session.run_agent(run)

    @while_running
    def on_agent_finished(self, message: AgentFinished) -> None:
        text = f"agent on {message.problem} stopped: {message.reason}"
        self.notify(text, severity="error" if message.failed else "information", timeout=8, markup=False)
        self._update_status()
        self.load_snapshot()

    def action_stop_agent(self) -> None:
        if not self.showing_highlighted():
            return
        try:
            run = self.session.stop_agent(self.snapshot.problem or "")
        except SessionRefused as exc:
            self.notify(str(exc), severity="warning")
            return
        self.notify(f"stopping the agent on {run.problem}…", timeout=3, markup=False)

    def action_profile(self) -> None:
        row = self.selected_version()
        if row is None:
            return
        try:
            self.session.profile(Path(row["path"]))
        except SessionRefused as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify(f"{row['name']} queued for a profile (Nsight Compute; shown with its rungs)", timeout=4)

    def action_sanitize(self) -> None:
        row = self.selected_version()
        if row is None:
            return
        try:
            self.session.sanitize(Path(row["path"]))
        except SessionRefused as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify(f"{row['name']} queued to be judged again under compute-sanitizer", timeout=4, markup=False)

    def action_rebench(self) -> None:
        row = self.selected_version()
        if row is None:
            return
        try:
            self.session.judge_again(Path(row["path"]))
        except SessionRefused as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify(f"{row['name']} queued to be judged again", timeout=3)

    def action_rejudge_stale(self) -> None:
        """Every version of the problem judged against an older problem.py, judged again (rows in hand: the
        snapshot the table shows)."""
        if not self.showing_highlighted():
            return
        stale = [r for r in self.snapshot.versions if r.get("stale") and r.get("path") and not r.get("deleted")]
        if not stale:
            self.notify("no version here was judged against an older problem.py", timeout=4)
            return
        try:
            for row in stale:
                self.session.judge_again(Path(row["path"]))
        except SessionRefused as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify(f"{len(stale)} stale version(s) queued to be judged again", timeout=4)

    def action_accept_problem(self) -> None:
        """The selected problem's files changed on disk: their diff against the accepted ones, accepted with y."""
        problem = self.snapshot.problem
        if not self.showing_highlighted() or problem is None:
            return
        change = pending_change(self.workspace, problem)
        if change is None:
            self.notify(f"{problem}: its files on disk are the accepted ones", timeout=4, markup=False)
            return
        digest, diff = change

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            if self.session.scheduler is None:
                self.notify("judging is off in this session: kerneltui accept-problem accepts it", severity="error")
                return
            self.session.scheduler.accept_problem(problem, digest)
            self.notify(f"{problem}: changed files accepted; judged against from now", timeout=4, markup=False)

        self.push_screen(ProblemChangeScreen(problem, diff), answered)
