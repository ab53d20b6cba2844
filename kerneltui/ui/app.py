"""The dashboard: watch a workspace, judge every new version, review and steer from one screen.

Reading the history, writing verdicts and running the ladder all happen off the UI thread (thread
workers and the scheduler's own thread); results come back as messages.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Input, Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from kerneltui.core.agent_host import AgentRun
from kerneltui.core.config import Config
from kerneltui.core.scheduler import Scheduler, SchedulerEvent
from kerneltui.core.session import AgentEnded, PermissionWaiting, Recorded, Session, SessionEvent, SessionRefused
from kerneltui.core.workspace import Workspace
from kerneltui.ui.commands import KernelCommands
from kerneltui.ui.messages import (
    AgentFinished,
    Detail,
    DetailLoaded,
    PermissionAsked,
    RecordedMessage,
    SchedulerChanged,
    Snapshot,
    SnapshotLoaded,
)
from kerneltui.ui.screens.dialogs import HelpScreen, QuitScreen, RejectScreen
from kerneltui.ui.widgets.agent import AgentPane, agent_lines
from kerneltui.ui.widgets.asm import AsmPane
from kerneltui.ui.widgets.diff import DiffPane, diff_for
from kerneltui.ui.widgets.problems import ProblemTable
from kerneltui.ui.widgets.rungs import RungsPane, detail_lines
from kerneltui.ui.widgets.status import StatusBar, status_text
from kerneltui.ui.widgets.text_view import TextView
from kerneltui.ui.widgets.trends import TrendsPane
from kerneltui.ui.widgets.versions import VersionTable

TABS = ("rungs", "diff", "trends", "asm", "agent")
POLL_S = 0.5


def while_running(handler: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    """A message still queued when shutdown has removed the widgets (background work, a cursor move) is dropped."""

    @functools.wraps(handler)
    def guarded(app: Any, message: Any) -> None:
        if app.is_running:
            handler(app, message)

    return guarded


class KernelTUI(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "kerneltui"
    COMMANDS = App.COMMANDS | {KernelCommands}
    BINDINGS = [
        Binding("a", "approve", "approve", id="approve", tooltip="approve the selected version"),
        Binding("r", "reject", "reject", id="reject", tooltip="reject the selected version, with a reason"),
        Binding("i", "guide", "guide", id="guide", tooltip="type guidance for the agent"),
        Binding("d", "diff", "diff", id="diff", tooltip="diff against previous / best / approved"),
        Binding("slash", "search", "search", id="search", tooltip="search the pane on show"),
        Binding("b", "rebench", "bench", id="rebench", tooltip="judge the selected version again"),
        Binding("s", "start_agent", "start agent", id="start_agent", tooltip="start an agent on the selected problem"),
        Binding("x", "stop_agent", "stop", id="stop_agent", tooltip="stop the selected problem's agent"),
        # Answers to an ACP agent's permission request, live only while one waits on the Agent pane.
        *[
            Binding(
                key, f"permission('{answer}')", label, id=f"permission_{answer}", priority=True, show=False, tooltip=tip
            )
            for key, answer, label, tip in (
                ("y", "allow_once", "allow once", "an agent's permission request (Agent pane): allow once"),
                ("a", "allow_always", "allow always", "an agent's permission request (Agent pane): allow always"),
                ("n", "reject", "deny", "an agent's permission request (Agent pane): deny"),
            )
        ],
        Binding("tab", "cycle_pane", "pane", id="cycle_pane", priority=True, tooltip="next pane"),
        Binding("shift+tab", "cycle_pane(-1)", "pane", id="cycle_pane_back", show=False, priority=True),
        Binding("question_mark", "help", "help", id="help"),
        Binding("q", "quit_app", "quit", id="quit"),
        *[Binding(str(n), f"tab('{tab}')", tab, id=f"tab_{tab}", show=False) for n, tab in enumerate(TABS, 1)],
    ]

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
        self.stale_panes: set[str] = set()
        self.rungs_width = 116
        self.rungs_expanded = False

    @property
    def agents(self) -> dict[str, AgentRun]:
        return self.session.agents

    @property
    def asks(self) -> dict[str, Any]:
        return self.session.asks

    @property
    def scheduler(self) -> Scheduler | None:
        return self.session.scheduler

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
                yield Input(placeholder="search (a regular expression)", id="search-box")
        yield Input(placeholder="guidance ▸ press i, type what the agent should try next, Enter sends", id="guidance")
        yield Footer()

    def on_mount(self) -> None:
        if self.config.keys:
            self.set_keymap(self.config.keys)
        self.query_one("#search-box").display = False
        self.query_one("#versions", VersionTable).focus()
        self._update_status()
        self.start_up()
        self.set_interval(POLL_S, self.poll_history)
        if self.note:
            self.notify(self.note, timeout=30, markup=False)

    @work(thread=True, group="startup", exit_on_error=False)
    def start_up(self) -> None:
        """Opens the history off the UI thread. An existing one is read at once with plain sqlite3; the
        writer (sqlite-utils, and creating a new history) comes after the first screen (open_writer_soon)."""
        if self.session.has_history:
            self.session.open_readers()
            with self.session.reading("snapshot") as store:
                if store is not None:
                    self.post_message(SnapshotLoaded(self._read_snapshot(store)))
        else:
            self.session.open_writer()
            self.call_from_thread(self.load_snapshot)

    @work(thread=True, group="startup", exit_on_error=False)
    def open_writer_soon(self) -> None:
        self.session.open_writer()

    def start_scheduler(self) -> None:
        """After the first screen is up: the writer, the scan and the judges' start need not delay it."""
        if "write" not in self.session.stores:
            self.open_writer_soon()
        if self.session.start_scheduler():
            for problem in self.autostart:
                self.start_agent(problem)
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

    # --- loading what the screen shows ---------------------------------------------------------

    def poll_history(self) -> None:
        """Notices writes by other processes (the CLI's approve/reject/guide) within a second."""
        if self.session.history_changed():
            self.load_snapshot()

    @work(thread=True, exclusive=True, group="snapshot", exit_on_error=False)
    def load_snapshot(self) -> None:
        with self.session.reading("snapshot") as store:
            if store is None:
                return
            snapshot = self._read_snapshot(store)
        if not get_current_worker().is_cancelled:
            self.post_message(SnapshotLoaded(snapshot))

    def _read_snapshot(self, store: Any) -> Snapshot:
        view = self.session.read_view(store, self._selected_problem())
        problem = view.problem
        # Wrapping a long transcript takes milliseconds: done here, off the UI thread, on every change.
        width = max(60, self.size.width - 38)  # the detail pane's text width, known while its tab is hidden
        running, ask = problem in self.agents, self.asks.get(problem or "")
        lines = agent_lines(problem, view.agent_session, view.agent_events, view.guidance, running, width, ask)
        return Snapshot(view.problems, view.versions, problem, view.pending, view.guidance, lines)

    def _selected_problem(self) -> str | None:
        """Read from worker threads: the UI thread keeps `wanted_problem` current, no widget is touched."""
        return self.wanted_problem or self.snapshot.problem

    @while_running
    def on_snapshot_loaded(self, message: SnapshotLoaded) -> None:
        snapshot = message.snapshot
        changed_problem = snapshot.problem != self.snapshot.problem
        self.snapshot = snapshot
        self.query_one("#problems", ProblemTable).show(snapshot.problems)
        table = self.query_one("#versions", VersionTable)
        table.show(snapshot.versions, reset=changed_problem)
        title = Text(f" {snapshot.problem or 'no problems yet'}", style="bold")
        problem_row = next((p for p in snapshot.problems if p["name"] == snapshot.problem), None)
        if problem_row and problem_row.get("description"):
            title.append(f" · {problem_row['description'].splitlines()[0][:90]}", style="dim")
        if problem_row and problem_row.get("error"):
            title.append(f"   ⚠ {problem_row['error'][:120]}", style="red")
        if not snapshot.problems:
            title.append(f"  (add <problem>/problem.py under {self.workspace.root})", style="dim")
        self.query_one("#versions-title", Static).update(title)
        self._show_agent()
        self._update_status()
        self.call_after_refresh(self.start_scheduler)
        selected = table.selected
        if selected is None:
            self.detail = None
            self.query_one("#rungs-view", RungsPane).show(None)
        elif self.detail is None or self._detail_stale(selected):
            self.load_detail(selected)

    def _show_agent(self) -> None:
        self.query_one("#agent-view", AgentPane).show(self.snapshot.agent_lines)

    def _detail_stale(self, row: dict[str, Any]) -> bool:
        assert self.detail is not None
        old = self.detail.version
        keys = ("version_id", "evaluation_id", "status", "last_rung", "verdict", "verdict_reason", "deleted")
        return any(old.get(k) != row.get(k) for k in keys)

    @on(DataTable.RowHighlighted, "#versions")
    @while_running
    def version_highlighted(self, event: DataTable.RowHighlighted) -> None:
        row = self.query_one("#versions", VersionTable).selected
        if row is not None and (
            self.detail is None or self.detail.version.get("name") != row["name"] or self._detail_stale(row)
        ):
            self.load_detail(row)

    @on(DataTable.RowHighlighted, "#problems")
    @while_running
    def problem_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value != self.snapshot.problem:
            self.wanted_problem = event.row_key.value
            self.load_snapshot()

    def load_detail(self, row: dict[str, Any]) -> None:
        pane = self.query_one("#rungs-view", RungsPane)
        self.rungs_width = max(60, pane.scrollable_content_region.width - 4)
        self.rungs_expanded = pane.expanded
        self._load_detail(row)

    @work(thread=True, exclusive=True, group="detail", exit_on_error=False)
    def _load_detail(self, row: dict[str, Any]) -> None:
        with self.session.reading("detail") as store:
            if store is None:
                return
            detail = self.session.read_detail(store, row, self.snapshot.problem or "", self.snapshot.versions)
        for target in detail.compare:
            detail.diffs[target] = diff_for(detail, target)
        detail.rung_lines = detail_lines(detail, self.rungs_expanded, self.rungs_width)
        if not get_current_worker().is_cancelled:
            self.post_message(DetailLoaded(detail))

    @while_running
    def on_detail_loaded(self, message: DetailLoaded) -> None:
        detail = message.detail
        same = self.detail is not None and detail is not None and self.detail.version["name"] == detail.version["name"]
        self.detail = detail
        rungs = self.query_one("#rungs-view", RungsPane)
        if detail is None:
            rungs.show(None)
        else:
            rungs.set_lines(detail.rung_lines, keep_scroll=same)
        self._show_diff()
        self.stale_panes = {"trends", "asm"}
        self._refresh_active_pane()

    @on(TabbedContent.TabActivated, "#detail")
    @while_running
    def tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._refresh_active_pane()

    def _refresh_active_pane(self) -> None:
        """Trends and Asm cost a plot or a file read: drawn when shown, not on every cursor move."""
        active = self.query_one("#detail", TabbedContent).active
        detail = self.detail
        if detail is None or active not in self.stale_panes:
            return
        self.stale_panes.discard(active)
        if active == "trends":
            self.query_one("#trends-view", TrendsPane).show(self.snapshot.problem, detail.trends)
        elif active == "asm":
            previous = detail.compare.get("previous")
            self.query_one("#asm-pane", AsmPane).show(
                detail.version,
                detail.source,
                detail.artifacts,
                previous["name"] if previous else "",
                detail.compare_artifacts.get("previous", []),
            )

    def _show_diff(self) -> None:
        pane = self.query_one("#diff-view", DiffPane)
        title = self.query_one("#diff-title", Static)
        detail = self.detail
        if detail is None:
            pane.set_lines([])
            return
        header = Text(f" {detail.version['name']} vs {pane.target}", style="bold")
        header.append("   d cycles: previous · best · approved", style="dim")
        title.update(header)
        lines = detail.diffs.get(pane.target)
        pane.set_lines(lines if lines is not None else diff_for(detail, pane.target))

    def _update_status(self) -> None:
        waiting = max(0, self.snapshot.pending - self.running)
        if self.deferred_to:
            judges = f"judged by kerneltui pid {self.deferred_to}"
        else:
            judges = "judge starting…" if self.session.run_judges and self.session.run_scheduler else "judging off"
        agents = [(run.agent.model, problem) for problem, run in self.agents.items()]
        self.query_one("#status", StatusBar).update(
            status_text(str(self.workspace.root), self.device, self.running, waiting, judges, agents)
        )

    # --- what the scheduler says ----------------------------------------------------------------

    @while_running
    def on_scheduler_changed(self, message: SchedulerChanged) -> None:
        event = message.event
        if event.kind == "judge":
            self.device = event.data.get("device")
        elif event.kind == "started":
            self.running += 1
        elif event.kind in ("finished", "failed"):
            self.running = max(0, self.running - 1)
            if event.data.get("beat_best"):
                self._alert(
                    f"{event.problem} {event.version} beats the best: {event.data.get('vs_best', 0):.2f}× faster"
                )
        elif event.kind == "idle" and not self.agents:  # with an agent at work the queue empties every version
            self._alert("queue empty: every version is judged")
        elif event.kind == "warning":
            self.notify(str(event.data.get("message")), severity="warning", timeout=10, markup=False)
        elif event.kind == "deferred":
            self.deferred_to = event.data.get("pid")
            self.notify(
                f"kerneltui pid {self.deferred_to} already judges this workspace: its results show here",
                timeout=10,
                markup=False,
            )
        self.load_snapshot()

    def _alert(self, text: str) -> None:
        if self.config.bell:
            self.bell()
        self.notify(text, timeout=6, markup=False)

    # --- actions -------------------------------------------------------------------------------

    def selected_version(self) -> dict[str, Any] | None:
        row = self.query_one("#versions", VersionTable).selected
        if row is None:
            self.notify("no version selected", severity="warning")
        return row

    def action_approve(self) -> None:
        row = self.selected_version()
        if row is not None:
            self.record_verdict(row, "approved", None)

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
        if not text:
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
            self.query_one("#diff-view", DiffPane).cycle()
        tabs.active = "diff"
        self._show_diff()

    def action_tab(self, tab: str) -> None:
        self.query_one("#detail", TabbedContent).active = tab

    def active_view(self) -> TextView | None:
        tab = self.query_one("#detail", TabbedContent).active
        views = {"rungs": "#rungs-view", "diff": "#diff-view", "asm": "#asm-view", "agent": "#agent-view"}
        return self.query_one(views[tab], TextView) if tab in views else None

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

    # --- agents ---------------------------------------------------------------------------------

    def action_start_agent(self) -> None:
        if self.snapshot.problem is None:
            self.notify("no problem selected", severity="warning")
            return
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
        try:
            run = self.session.stop_agent(self.snapshot.problem or "")
        except SessionRefused as exc:
            self.notify(str(exc), severity="warning")
            return
        self.notify(f"stopping the agent on {run.problem}…", timeout=3, markup=False)

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

    def select_problem(self, name: str) -> None:
        self.wanted_problem = name
        table = self.query_one("#problems", ProblemTable)
        if name in table.names:
            table.move_cursor(row=table.names.index(name))

    def action_cycle_pane(self, step: int = 1) -> None:
        if self.screen is not self.screen_stack[0]:
            self.screen.focus_next() if step > 0 else self.screen.focus_previous()
            return
        order = [self.query_one("#problems"), self.query_one("#versions")]
        view = self.active_view()
        order.append(view if view is not None else self.query_one("#detail", TabbedContent))
        order.append(self.query_one("#guidance"))
        focused = self.focused
        index = next((i for i, w in enumerate(order) if focused is w or (focused and w in focused.ancestors)), -1)
        order[(index + step) % len(order)].focus()

    def action_help(self) -> None:
        rows = []
        keymap = self.config.keys
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            keys = keymap.get(binding.id or "", binding.key)
            rows.append((keys, binding.tooltip or binding.description, binding.id or ""))
        self.push_screen(HelpScreen(rows))

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
            if self.interrupt_agent():
                event.stop()
        elif event.key == "enter" and isinstance(self.focused, RungsPane):
            pane = self.focused
            pane.expanded = not pane.expanded
            pane.show(self.detail, keep_scroll=True)
            event.stop()

    def on_unmount(self) -> None:
        self.session.close()
