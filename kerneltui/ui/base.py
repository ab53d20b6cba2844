"""What every part of the dashboard shares: its state, the session it fronts, the status line."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from textual import messages
from textual.app import App
from textual.notifications import SeverityLevel

from kerneltui.core.agents.host import AgentRun
from kerneltui.core.config import Config
from kerneltui.core.judging.scheduler import Scheduler
from kerneltui.core.notify import Notice, Notifier
from kerneltui.core.session import Detail, Session
from kerneltui.core.workspace import Workspace
from kerneltui.ui.messages import Snapshot
from kerneltui.ui.widgets.format import shown
from kerneltui.ui.widgets.problems import ProblemTable
from kerneltui.ui.widgets.status import StatusBar, status_text

NOTE_CHARS = 600  # a notification's text, cut
STATUS_CHARS = 1_000
EXIT_WAIT_S = 10.0  # an exit asked for before the first screen waits at most this long for it


def while_running(handler: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    """A message still queued when shutdown has removed the widgets (background work, a cursor move) is dropped."""

    @functools.wraps(handler)
    def guarded(app: Any, message: Any) -> None:
        if app.is_running:
            handler(app, message)

    return guarded


class DashboardBase(App[None]):
    """The state the dashboard's parts (kerneltui.ui.panes, steering, agent_desk) read and write, set up by
    KernelTUI.__init__, and what they all use: notifications and the status line."""

    session: Session
    workspace: Workspace
    config: Config
    snapshot: Snapshot
    detail: Detail | None
    device: dict[str, Any] | None
    running: int
    deferred_to: int | None
    wanted_problem: str | None
    version_filter: str  # one of widgets.versions.FILTERS
    marked: dict[str, Any] | None  # the version `m` marked: {"version_id", "name"}; the Diff pane's "marked"
    stale_panes: set[str]
    rungs_width: int
    rungs_expanded: bool

    drawn = False  # the first screen is up (Textual's Ready)
    exit_waiting = False  # an exit asked for before it, to carry out once it is

    def start_scheduler(self) -> None:
        """Starts judging once the first screen is up (KernelTUI)."""

    def on_exit_app(self, message: messages.ExitApp) -> None:
        """An exit asked for before the first screen is drawn (a browser closed at once, serve-web's quit) waits
        for it: Textual 8.2 quitting while the TabbedContent is still being laid out never ends, its screen laid
        out again and again at full CPU."""
        if not self.drawn:
            message.prevent_default()
            self.exit_waiting = True
            self.set_timer(EXIT_WAIT_S, self._exit_now)

    def on_ready(self) -> None:
        self.drawn = True
        if self.exit_waiting:
            self.exit()

    def _exit_now(self) -> None:
        self.drawn = True  # or never: the exit goes ahead either way
        self.exit()

    @property
    def agents(self) -> dict[str, AgentRun]:
        return self.session.agents

    @property
    def asks(self) -> dict[str, Any]:
        return self.session.asks

    @property
    def scheduler(self) -> Scheduler | None:
        return self.session.scheduler

    def update_status(self, width: int | None = None) -> None:
        """`width`: the terminal's new width, during a resize (the app's size is the old one until it is done)."""
        waiting = max(0, self.snapshot.pending - self.running)
        if self.deferred_to:
            judges = f"judged by kerneltui pid {self.deferred_to}"
        else:
            judges = "judge starting…" if self.session.run_judges and self.session.run_scheduler else "judging off"
        # agents end on their own threads: a copy to iterate
        agents = [(run.agent.model, problem) for problem, run in list(self.agents.items())]
        root = str(self.workspace.root)
        line = status_text(
            root, self.device, self.running, waiting, judges, agents, self.judge_states(), width or self.size.width
        )
        self.query_one("#status", StatusBar).update(shown(line, limit=STATUS_CHARS))

    def judge_states(self) -> list[dict[str, Any]]:
        """This dashboard's judges (none while another kerneltui judges the workspace): an in-memory read of the
        scheduler's, cheap enough for the UI thread."""
        scheduler = self.scheduler
        if scheduler is None or not scheduler.owner:
            return []
        return scheduler.judge_states()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every notification is text, never markup, whatever its caller asked (most quote a version, an agent or a
        problem): written out and cut as format.shown does."""
        said, heading = shown(message, limit=NOTE_CHARS).plain, shown(title, limit=80).plain
        super().notify(said, title=heading, severity=severity, timeout=timeout, markup=False)

    def select_problem(self, name: str) -> None:
        """The problem's row highlighted: its versions are read and shown."""
        self.wanted_problem = name
        table = self.query_one("#problems", ProblemTable)
        if name in table.names:
            table.move_cursor(row=table.names.index(name))

    @functools.cached_property
    def notifier(self) -> Notifier:
        return Notifier(self.config.notify, self.write_terminal, self.ring, self.notifier_failed)

    def tell(self, notice: Notice, severity: SeverityLevel = "information") -> None:
        """A notice in the dashboard, and where `[notify]` sends it (the terminal, a command)."""
        self.notify(f"{notice.title}: {notice.body}", severity=severity, timeout=8 if severity != "error" else 12)
        self.notifier.send(notice)

    def ring(self) -> None:
        if self.config.bell:
            self.bell()

    def write_terminal(self, sequence: str) -> None:
        """An escape sequence (a desktop notification) written among Textual's own output, on the app's thread."""
        driver = self._driver
        if driver is not None:
            driver.write(sequence)
            driver.flush()

    def notifier_failed(self, said: str) -> None:
        """The `[notify]` command failed (said from its thread)."""
        try:
            self.call_from_thread(self.notify, said, severity="warning", timeout=10)
        except RuntimeError:  # the app has ended
            pass
