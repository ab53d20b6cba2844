"""The dashboard: watch a workspace, judge every new version, review and steer from one screen.

Reading the history, writing verdicts and running the ladder all happen off the UI thread (thread
workers and the scheduler's own thread); results come back as messages.
"""

from __future__ import annotations

from typing import Any

from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Input, Static, TabbedContent, TabPane
from textual.worker import Worker, WorkerState

from kerneltui.core.config import Config
from kerneltui.core.judging.scheduler import SchedulerEvent
from kerneltui.core.session import AgentEnded, PermissionWaiting, Recorded, Session, SessionEvent
from kerneltui.core.workspace import Workspace
from kerneltui.ui.base import while_running
from kerneltui.ui.commands import KernelCommands
from kerneltui.ui.messages import (
    AgentFinished,
    Detail,
    PermissionAsked,
    RecordedMessage,
    SchedulerChanged,
    Snapshot,
    SnapshotLoaded,
)
from kerneltui.ui.screens.dialogs import HelpScreen, QuitScreen
from kerneltui.ui.screens.gpus import JudgesScreen
from kerneltui.ui.screens.leaderboard import LeaderboardScreen
from kerneltui.ui.steering import Steering
from kerneltui.ui.widgets.agent import AgentPane
from kerneltui.ui.widgets.asm import AsmPane
from kerneltui.ui.widgets.diff import DiffPane
from kerneltui.ui.widgets.problems import ProblemTable
from kerneltui.ui.widgets.profile import ProfilePane
from kerneltui.ui.widgets.rungs import RungsPane
from kerneltui.ui.widgets.status import StatusBar
from kerneltui.ui.widgets.trends import TrendsPane
from kerneltui.ui.widgets.versions import FILTERS, VersionTable

TABS = ("rungs", "diff", "trends", "asm", "agent", "profile")
POLL_S = 0.5
ASM_KEYS = (("comma", ","), ("full_stop", "."), ("t", "t"), ("c", "c"))
ACCEPT_TIP = "the problem's files changed on disk: see the diff, accept them to judge against them"


class KernelTUI(Steering):
    CSS_PATH = "app.tcss"
    TITLE = "kerneltui"
    COMMANDS = App.COMMANDS | {KernelCommands}
    BINDINGS = [
        # First: the footer is cut on the right on a narrow terminal, and these two must stay on it.
        Binding("question_mark", "help", "help", id="help"),
        Binding("q", "quit_app", "quit", id="quit"),
        Binding("a", "approve", "approve", id="approve", tooltip="approve the selected version"),
        Binding("r", "reject", "reject", id="reject", tooltip="reject the selected version, with a reason"),
        Binding("u", "undo_verdict", "undo", id="undo_verdict", show=False, tooltip="withdraw the last verdict"),
        Binding("i", "guide", "guide", id="guide", tooltip="type guidance for the agent"),
        Binding("d", "diff", "diff", id="diff", tooltip="diff against previous / best / approved / earlier / marked"),
        Binding(
            "m", "mark", "mark", id="mark", show=False, tooltip="mark the selected version: diff others against it"
        ),
        Binding("v", "source", "source", id="source", show=False, tooltip="the selected version's source"),
        Binding("f", "filter", "filter", id="filter", show=False, tooltip="versions: all, hide failed, only approved"),
        Binding("e", "edit", "edit", id="edit", show=False, tooltip="open the selected version in $EDITOR"),
        Binding("slash", "search", "search", id="search", tooltip="search the pane on show"),
        Binding("b", "rebench", "bench", id="rebench", tooltip="judge the selected version again"),
        Binding(
            "B",
            "rejudge_stale",
            "stale",
            id="rejudge_stale",
            show=False,
            tooltip="judge again every version judged against an older problem.py",
        ),
        Binding("A", "accept_problem", "accept problem", id="accept_problem", show=False, tooltip=ACCEPT_TIP),
        Binding(
            "p",
            "profile",
            "profile",
            id="profile",
            show=False,
            tooltip="profile the selected version with Nsight Compute",
        ),
        Binding(
            "S",
            "sanitize",
            "sanitize",
            id="sanitize",
            show=False,
            tooltip="judge the selected version again under compute-sanitizer: memcheck, racecheck, initcheck...",
        ),
        Binding(
            "L",
            "leaderboard",
            "leaderboard",
            id="leaderboard",
            show=False,
            tooltip="agents measured on this workspace (kerneltui bench-agents): fast_p, each agent's best",
        ),
        Binding(
            "w",
            "judges",
            "judges",
            id="gpus",
            show=False,
            tooltip="the judges, one per GPU: where each runs, what it judges now, how many it judged",
        ),
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
        *[Binding(str(n), f"tab('{tab}')", tab, id=f"tab_{tab}", show=False) for n, tab in enumerate(TABS, 1)],
        # The Asm pane's own keys, pressed elsewhere: said why nothing happened, not silently dropped.
        *[Binding(key, f"asm_key_elsewhere('{shown}')", shown, show=False) for key, shown in ASM_KEYS],
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
        self.version_filter = FILTERS[0]
        self.marked: dict[str, Any] | None = None
        self.stale_panes: set[str] = set()
        self.rungs_width = 116
        self.rungs_expanded = False

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
                yield Input(placeholder="search (a regular expression)", id="search-box")
        yield Input(placeholder="guidance ▸ press i, type what the agent should try next, Enter sends", id="guidance")
        yield Footer()

    def on_resize(self, event: events.Resize) -> None:
        self.query_one("#problems", ProblemTable).fit(event.size.width)
        self._update_status(event.size.width)  # the judges' load compacts on a narrow terminal

    def on_mount(self) -> None:
        self.query_one("#problems", ProblemTable).fit(self.size.width)
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
                how = "raced back to back" if event.data.get("race") else "by median"
                vs_best = event.data.get("vs_best", 0)
                self._alert(f"{event.problem} {event.version} beats the best ({how}): {vs_best:.2f}× faster")
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
        self._update_status()  # each judge's load, at once: the snapshot read comes after
        self.load_snapshot()

    # --- actions -------------------------------------------------------------------------------

    # --- agents ---------------------------------------------------------------------------------

    def action_cycle_pane(self, step: int = 1) -> None:
        if self.screen is not self.screen_stack[0]:
            self.screen.focus_next() if step > 0 else self.screen.focus_previous()
            return
        order = [self.query_one("#problems"), self.query_one("#versions")]
        view = self.active_view()
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
            if self.interrupt_agent():
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
