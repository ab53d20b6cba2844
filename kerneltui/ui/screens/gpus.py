"""The judges view: each judge (one per GPU, or `[ladder] judges` of them with no GPU), where it runs, what it
judges now and how many it judged; read again every second while open; Esc, q or w closes it."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.binding import Binding

from kerneltui.core.session import Session
from kerneltui.ui.screens.panel import PanelScreen
from kerneltui.ui.widgets.format import shown

REFRESH_S = 1.0


def judges_table(states: list[dict[str, Any]]) -> Table:
    table = Table(title=f"judges: {len(states)}", title_justify="left", expand=True)
    for head in ("judge", "where", "device", "state", "judged"):
        table.add_column(head, no_wrap=head != "state", justify="right" if head == "judged" else "left")
    for s in states:
        if s.get("busy"):
            state = shown(f"● busy: {s['busy']}", style="yellow")
        else:
            state = Text("○ idle", style="green") if s.get("ready") else Text("◌ starting", style="dim")
        cells = (s["judge"], s["where"], s.get("device") or "—", state, s["judged"])
        table.add_row(*(shown(cell, limit=200) for cell in cells))
    return table


def judging_said(session: Session, deferred_to: int | None) -> Text | None:
    """Why no judge of this dashboard's can be listed; None when they can."""
    scheduler = session.scheduler
    if not session.run_scheduler or not session.run_judges:
        return Text("judging is off in this dashboard: it only shows the history", style="dim")
    if scheduler is None or not scheduler.started.is_set():
        return Text("judging is starting…", style="dim")
    if not scheduler.owner:
        pid = deferred_to or (scheduler.lock.holder() if scheduler.lock else None)
        return Text(f"kerneltui pid {pid or '?'} judges this workspace: its judges are listed there", style="dim")
    return None


class JudgesScreen(PanelScreen):
    BINDINGS = [Binding("escape,q,w", "close", "close")]
    PANEL_ID = "judges"
    WAITING = "reading the judges…"

    def __init__(self, session: Session, deferred_to: int | None = None) -> None:
        super().__init__()
        self.session, self.deferred_to = session, deferred_to

    def on_mount(self) -> None:
        self.show()
        self.set_interval(REFRESH_S, self.show)

    def show(self) -> None:
        """judge_states() is an in-memory read of the scheduler's (no history, no judge asked): no thread needed."""
        said = judging_said(self.session, self.deferred_to)
        scheduler = self.session.scheduler
        if said is not None or scheduler is None:
            self.draw(said or Text(""))
            return
        states = scheduler.judge_states()
        busy = sum(1 for s in states if s.get("busy"))
        queued = max(0, scheduler.pending - busy)
        summary = Text(f"{busy} of {len(states)} busy · {queued} waiting in the queue", style="bold")
        self.draw(Group(summary, Text(""), judges_table(states)))
