"""The dashboard: watch a workspace, judge every new version, review and steer from one screen.

Reading the history, writing verdicts and running the ladder all happen off the UI thread (thread
workers and the scheduler's own thread); results come back as messages.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from textual import events, on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Input, Static, TabbedContent, TabPane
from textual.worker import Worker, WorkerState

from kerneltui.core.config import Config
from kerneltui.core.judging.scheduler import SchedulerEvent
from kerneltui.core.session import AgentEnded, AgentPaused, PermissionWaiting, Recorded, Session, SessionEvent
from kerneltui.core.workspace import Workspace
from kerneltui.ui.agent_desk import AgentDesk
from kerneltui.ui.base import DashboardBase, while_running
from kerneltui.ui.commands import KernelCommands
from kerneltui.ui.keys import BINDINGS
from kerneltui.ui.line_comments import GUIDANCE_PROMPT, LineComments
from kerneltui.ui.messages import (
    AgentFinished,
    AgentPausedMessage,
    Detail,
    DetailLoaded,
    PermissionAsked,
    RecordedMessage,
    SchedulerChanged,
    Snapshot,
    SnapshotLoaded,
)
from kerneltui.ui.panes import ScreenView
from kerneltui.ui.screens.dialogs import HelpScreen, QuitScreen
from kerneltui.ui.screens.gpus import JudgesScreen
from kerneltui.ui.screens.leaderboard import LeaderboardScreen
from kerneltui.ui.steering import SEARCH_PROMPT, Steering
from kerneltui.ui.widgets.agent import AgentPane
from kerneltui.ui.widgets.asm import AsmPane
from kerneltui.ui.widgets.diff import DiffPane
from kerneltui.ui.widgets.problems import ProblemTable
from kerneltui.ui.widgets.profile import ProfilePane
from kerneltui.ui.widgets.rungs import RungsPane
from kerneltui.ui.widgets.status import StatusBar
from kerneltui.ui.widgets.trends import TrendsPane
from kerneltui.ui.widgets.versions import FILTERS, VersionTable

POLL_S = 0.5


def handed_to(part: str, method: str) -> Callable[[KernelTUI], None]:
    """An action of the app that one of its parts carries out."""

    def action(app: KernelTUI) -> None:
        getattr(getattr(app, part), method)()

    action.__doc__ = f"{part}.{method}"
    return action


class KernelTUI(DashboardBase):
    """The app: its layout, start and end, and the keys and messages it hands to its parts: what the screen shows
    (ScreenView), what the person does to versions (Steering) and the agents (AgentDesk)."""

    CSS_PATH = "app.tcss"
    TITLE = "kerneltui"
    COMMANDS = App.COMMANDS | {KernelCommands}
    BINDINGS = BINDINGS

    def __init__(
        self,
        workspace: Workspace,
        config: Config | None = None,
        run_scheduler: bool = True,
        run_judges: bool = True,
        autostart: list[str] | None = None,
        note: str | None = None,
    ) -> None:
        super().__init__()
        self.autostart = list(autostart or [])  # problems to start an agent on once judging is up (the demo)
        self.note = note  # shown once the screen is up (the demo says what is going on)
        self.deferred_to: int | None = None
        self.workspace = workspace
        self.config = config or Config()
        self.session = Session(workspace, self.config, self._from_session, run_scheduler, run_judges)
        self.snapshot = Snapshot()
        self.detail: Detail | None = None
        self.device: dict[str, Any] | None = None
        self.running = 0
        self.wanted_problem: str | None = None
        self.version_filter = FILTERS[0]
        self.marked: dict[str, Any] | None = None
        self.stale_panes: set[str] = set()
        self.rungs_width = 116
        self.rungs_expanded = False
        self.view = ScreenView(self)
        self.comments = LineComments(self)
        self.steering = Steering(self, self.view, self.comments)
        self.agent_desk = AgentDesk(self, self.view)

    # --- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Horizontal(id="main"):
            yield ProblemTable(id="problems")
            with Vertical(id="right"):
                yield Static("", id="versions-title")
                yield VersionTable(id="versions")
                with TabbedContent(id="detail", initial="rungs"):
                    with TabPane("Rungs", id="rungs"):
                        yield RungsPane(id="rungs-view")
                    with TabPane("Diff", id="diff"):
                        yield Static("", id="diff-title")
                        yield DiffPane(id="diff-view")
                    with TabPane("Trends", id="trends"):
                        yield TrendsPane(id="trends-view")
                    with TabPane("Asm", id="asm"):
                        yield AsmPane(id="asm-pane")
                    with TabPane("Agent", id="agent"):
                        yield AgentPane(id="agent-view")
                    with TabPane("Profile", id="profile"):
                        yield ProfilePane(id="profile-view")
                yield Input(placeholder=SEARCH_PROMPT, id="search-box")
        yield Input(placeholder=GUIDANCE_PROMPT, id="guidance")
        yield Footer()

    def on_resize(self, event: events.Resize) -> None:
        self.query_one("#problems", ProblemTable).fit(event.size.width)
        self.update_status(event.size.width)  # the judges' load compacts on a narrow terminal

    def on_mount(self) -> None:
        self.query_one("#problems", ProblemTable).fit(self.size.width)
        if self.config.keys:
            self.set_keymap(self.config.keys)
        self.query_one("#search-box").display = False
        self.query_one("#versions", VersionTable).focus()
        self.update_status()
        self.start_up()
        self.set_interval(POLL_S, self.view.poll_history)
        if self.note:
            self.notify(self.note, timeout=30, markup=False)

    @work(thread=True, group="startup", exit_on_error=False)
    def start_up(self) -> None:
        """Opens the history off the UI thread. An existing one is read at once with plain sqlite3; the
        writer (sqlite-utils, and creating a new history) comes after the first screen (open_writer_soon)."""
        if self.session.has_history:
            try:
                self.session.open_readers()
                with self.session.reading("snapshot") as store:
                    if store is not None:
                        self.post_message(SnapshotLoaded(self.view.read_snapshot(store)))
                return
            except sqlite3.Error:  # a file holding no history yet: the writer makes one (or moves a corrupt one aside)
                pass
        self.session.open_writer()
        self.call_from_thread(self.view.load_snapshot)

    @work(thread=True, group="startup", exit_on_error=False)
    def open_writer_soon(self) -> None:
        self.session.open_writer()

    def start_scheduler(self) -> None:
        """After the first screen is up: the writer, the scan and the judges' start need not delay it."""
        if "write" not in self.session.stores:
            self.open_writer_soon()
        if self.session.start_scheduler():
            for problem in self.autostart:
                self.agent_desk.start_agent(problem)
            self.autostart = []

    def _from_session(self, event: SessionEvent) -> None:
        """Events arrive on the scheduler's and agents' threads: each becomes a message (thread-safe)."""
        if isinstance(event, SchedulerEvent):
            self.post_message(SchedulerChanged(event))
        elif isinstance(event, Recorded):
            self.post_message(RecordedMessage(event.what, event.text))
        elif isinstance(event, AgentEnded):
            self.post_message(AgentFinished(event.problem, event.reason, event.failed))
        elif isinstance(event, PermissionWaiting):
            self.post_message(PermissionAsked(event.problem, event.ask))
        elif isinstance(event, AgentPaused):
            self.post_message(AgentPausedMessage(event.problem, event.reason))

    # --- what the scheduler says ----------------------------------------------------------------

    @while_running
    def on_scheduler_changed(self, message: SchedulerChanged) -> None:
        self.view.scheduler_said(message.event)

    # --- handed to the parts ---------------------------------------------------------------------

    @while_running
    def on_snapshot_loaded(self, message: SnapshotLoaded) -> None:
        self.view.show_snapshot(message.snapshot)

    @while_running
    def on_detail_loaded(self, message: DetailLoaded) -> None:
        self.view.show_detail(message.detail)

    @on(DataTable.RowHighlighted, "#versions")
    @while_running
    def version_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.view.version_highlighted()

    @on(DataTable.RowHighlighted, "#problems")
    @while_running
    def problem_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.view.problem_highlighted(event.row_key.value)

    @on(TabbedContent.TabActivated, "#detail")
    @while_running
    def tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.view.refresh_active_pane()

    @on(Input.Submitted, "#guidance")
    def guidance_submitted(self, event: Input.Submitted) -> None:
        self.steering.guidance_submitted(event.input, event.value)  # after quit too: typed guidance is kept

    @on(Input.Submitted, "#search-box")
    @while_running
    def search_submitted(self, event: Input.Submitted) -> None:
        self.steering.search_submitted(event.input, event.value)

    @while_running
    def on_recorded_message(self, message: RecordedMessage) -> None:
        self.steering.recorded(message.what, message.text)

    @while_running
    def on_permission_asked(self, message: PermissionAsked) -> None:
        self.agent_desk.permission_asked(message.problem, message.ask.title)

    @while_running
    def on_agent_paused_message(self, message: AgentPausedMessage) -> None:
        self.agent_desk.agent_paused(message.problem, message.reason)

    @while_running
    def on_agent_finished(self, message: AgentFinished) -> None:
        self.agent_desk.agent_finished(message.problem, message.reason, message.failed)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "permission":
            return self.agent_desk.pending_ask() is not None  # else the key does what it usually does
        return True

    action_approve = handed_to("steering", "approve")
    action_reject = handed_to("steering", "reject")
    action_undo_verdict = handed_to("steering", "undo_verdict")
    action_guide = handed_to("steering", "guide")
    action_diff = handed_to("steering", "diff")
    action_mark = handed_to("steering", "mark")
    action_source = handed_to("steering", "source")
    action_edit = handed_to("steering", "edit")
    action_search = handed_to("steering", "search")
    action_rebench = handed_to("steering", "rebench")
    action_rejudge_stale = handed_to("steering", "rejudge_stale")
    action_accept_problem = handed_to("steering", "accept_problem")
    action_profile = handed_to("steering", "profile")
    action_sanitize = handed_to("steering", "sanitize")
    action_comment = handed_to("comments", "comment")
    action_rewind = handed_to("steering", "rewind")
    action_start_agent = handed_to("agent_desk", "start_agent_here")
    action_stop_agent = handed_to("agent_desk", "stop_agent")
    action_grant_more = handed_to("agent_desk", "grant_more")

    def action_tab(self, tab: str) -> None:
        self.steering.tab(tab)

    def action_permission(self, kind: str) -> None:
        self.agent_desk.permission(kind)

    # --- the app's own ---------------------------------------------------------------------------

    def action_cycle_pane(self, step: int = 1) -> None:
        if self.screen is not self.screen_stack[0]:
            self.screen.focus_next() if step > 0 else self.screen.focus_previous()
            return
        order = [self.query_one("#problems"), self.query_one("#versions")]
        view = self.view.active_view()
        order.append(view if view is not None else self.query_one("#detail", TabbedContent))
        focused = self.focused
        if focused is self.query_one("#guidance"):  # reached with i only: a j typed after tab stays a key
            order.append(focused)
        index = next((i for i, w in enumerate(order) if focused is w or (focused and w in focused.ancestors)), -1)
        order[(index + step) % len(order)].focus()

    def action_filter(self) -> None:
        self.version_filter = FILTERS[(FILTERS.index(self.version_filter) + 1) % len(FILTERS)]
        self.notify(f"versions: {self.version_filter}", timeout=2)
        self.post_message(SnapshotLoaded(self.snapshot))  # shown again through the filter

    def action_asm_key_elsewhere(self, key: str) -> None:
        self.notify(f"{key} works in the Asm pane: press 4, then tab until its border lights", timeout=4)

    def action_help(self) -> None:
        rows = []
        keymap = self.config.keys
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            if binding.action.startswith("asm_key_elsewhere"):
                continue  # the Asm pane's keys are listed with it below
            keys = keymap.get(binding.id or "", binding.key)
            shown = " ".join(self.get_key_display(Binding(key.strip(), "")) for key in keys.split(","))
            rows.append((shown, binding.tooltip or binding.description, binding.id or ""))
        self.push_screen(HelpScreen(rows))

    def action_leaderboard(self) -> None:
        self.push_screen(LeaderboardScreen(self.workspace))

    def action_judges(self) -> None:
        self.push_screen(JudgesScreen(self.session, self.deferred_to))

    def action_quit_app(self) -> None:
        pending = self.session.pending
        if not pending and not self.agents:
            self.exit()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.exit()

        self.push_screen(QuitScreen(pending, len(self.agents)), answered)

    @while_running
    def on_key(self, event: Any) -> None:
        if event.key == "escape" and self.focused in (self.query_one("#guidance"), self.query_one("#search-box")):
            self.query_one("#search-box").display = False
            self.query_one("#versions").focus()
            event.stop()
        elif event.key == "escape" and self.query_one("#detail", TabbedContent).active == "agent":
            if self.agent_desk.interrupt_agent():
                event.stop()
        elif event.key == "enter" and isinstance(self.focused, RungsPane):
            pane = self.focused
            pane.expanded = not pane.expanded
            pane.show(self.detail, keep_scroll=True)
            event.stop()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Background work that fails (reading the history, writing a verdict, an agent's thread) is said,
        never lost: the workers do not end the app on an error."""
        if event.state == WorkerState.ERROR and self.is_running:
            error = event.worker.error
            self.notify(
                f"{event.worker.group or event.worker.name} failed: {type(error).__name__}: {error}",
                severity="error",
                timeout=15,
                markup=False,
            )

    def on_unmount(self) -> None:
        self.session.close()
