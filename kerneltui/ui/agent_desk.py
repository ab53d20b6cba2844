"""The agents on the dashboard: started and stopped by key, their permission requests answered, their end said."""

from __future__ import annotations

import functools
from typing import Any

from textual.widgets import TabbedContent

from kerneltui.core.agents.host import AgentRun
from kerneltui.core.notify import Notice
from kerneltui.core.session import SessionRefused
from kerneltui.ui.base import DashboardBase
from kerneltui.ui.panes import ScreenView


class AgentDesk:
    """Agents for the app it is part of: one per problem, run in thread workers."""

    def __init__(self, app: DashboardBase, view: ScreenView) -> None:
        self.app = app
        self.view = view

    def start_agent_here(self) -> None:
        """An agent on the problem shown."""
        if self.app.snapshot.problem is None:
            self.app.notify("no problem selected", severity="warning")
            return
        if self.view.showing_highlighted():
            self.start_agent(self.app.snapshot.problem)

    def start_agent(self, problem: str) -> None:
        try:
            run = self.app.session.start_agent(problem, judged_elsewhere=bool(self.app.deferred_to))
        except SessionRefused as exc:
            self.app.notify(str(exc), severity="error", timeout=12, markup=False)
            return
        self.app.notify(f"{run.agent.model} started on {problem}", timeout=4, markup=False)
        self.app.update_status()
        self.run_agent_worker(run)

    def permission_asked(self, problem: str, title: str) -> None:
        asks = f"{title}  (Agent pane: y allow once · a always · n deny)"
        self.app.tell(Notice("waiting", f"agent on {problem} asks", asks, problem=problem))
        self.view.load_snapshot()

    def pending_ask(self) -> Any:
        tab = self.app.query_one("#detail", TabbedContent).active
        return self.app.asks.get(self.app.snapshot.problem or "") if tab == "agent" else None

    def permission(self, kind: str) -> None:
        if self.pending_ask() is not None and self.app.session.answer_permission(self.app.snapshot.problem or "", kind):
            self.view.load_snapshot()

    def interrupt_agent(self) -> bool:
        """Esc on the Agent pane: ends the ACP agent's running turn so queued guidance goes now."""
        if not self.app.session.interrupt_agent(self.app.snapshot.problem or ""):
            return False
        self.app.notify("interrupting the agent's turn: queued guidance goes next", timeout=4)
        return True

    def run_agent_worker(self, run: AgentRun) -> None:
        work = functools.partial(self.app.session.run_agent, run)
        self.app.run_worker(work, thread=True, group="agents", exit_on_error=False)

    def agent_finished(self, problem: str, reason: str, failed: bool) -> None:
        notice = Notice("agent-failed" if failed else "waiting", f"agent on {problem} stopped", reason, problem=problem)
        self.app.tell(notice, "error" if failed else "information")
        self.app.update_status()
        self.view.load_snapshot()

    def agent_paused(self, problem: str, reason: str) -> None:
        said = f"{reason}  (+ grants its budget again · x stops it)"
        self.app.tell(Notice("waiting", f"agent on {problem} paused", said, problem=problem), "warning")
        self.view.load_snapshot()

    def grant_more(self) -> None:
        """+: the paused agent on the problem shown gets its budget again and goes on."""
        if not self.view.showing_highlighted():
            return
        problem = self.app.snapshot.problem or ""

        def grant() -> None:  # a write to the history: off the UI thread, as verdicts are
            try:
                granted = self.app.session.grant_more(problem)
            except SessionRefused as exc:
                self.app.call_from_thread(self.app.notify, str(exc), severity="warning", markup=False)
                return
            said = f"granted {granted} to the agent on {problem}"
            self.app.call_from_thread(self.app.notify, said, timeout=4, markup=False)
            self.app.call_from_thread(self.view.load_snapshot)

        self.app.run_worker(grant, thread=True, group="write", exit_on_error=False)

    def stop_agent(self) -> None:
        if not self.view.showing_highlighted():
            return
        try:
            run = self.app.session.stop_agent(self.app.snapshot.problem or "")
        except SessionRefused as exc:
            self.app.notify(str(exc), severity="warning")
            return
        self.app.notify(f"stopping the agent on {run.problem}…", timeout=3, markup=False)
