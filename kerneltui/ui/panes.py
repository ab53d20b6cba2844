"""Loading what the screen shows: the history read in worker threads, shown pane by pane."""

from __future__ import annotations

import functools
from typing import Any

from rich.text import Text
from textual.widgets import Static, TabbedContent
from textual.worker import get_current_worker

from harness.contract.units import TIME_NAME
from kerneltui.core.judging.events import SchedulerEvent
from kerneltui.core.notify import Notice
from kerneltui.ui.base import DashboardBase
from kerneltui.ui.messages import Detail, DetailLoaded, Snapshot, SnapshotLoaded
from kerneltui.ui.widgets.agent import AgentPane, agent_lines
from kerneltui.ui.widgets.asm import AsmPane, kernel_specs
from kerneltui.ui.widgets.diff import DiffPane, diff_for, targets_of
from kerneltui.ui.widgets.format import first_line, shown
from kerneltui.ui.widgets.problems import ProblemTable
from kerneltui.ui.widgets.profile import ProfilePane
from kerneltui.ui.widgets.rungs import RungsPane, detail_lines
from kerneltui.ui.widgets.text_view import TextView
from kerneltui.ui.widgets.trends import TrendsPane
from kerneltui.ui.widgets.versions import VersionTable, filter_rows


class ScreenView:
    """What the screen shows, for the app it is part of: the history read in thread workers (their results come
    back as SnapshotLoaded and DetailLoaded, which the app hands to show_snapshot and show_detail), the panes
    drawn from it, and which version and problem are highlighted."""

    def __init__(self, app: DashboardBase) -> None:
        self.app = app

    def poll_history(self) -> None:
        """Notices writes by other processes (the CLI's approve/reject/guide) within a second."""
        if self.app.session.history_changed():
            self.load_snapshot()

    def load_snapshot(self) -> None:
        """Reads the history in a thread worker (a newer reading cancels an older one): SnapshotLoaded."""
        self.app.run_worker(self._load_snapshot, thread=True, exclusive=True, group="snapshot", exit_on_error=False)

    def _load_snapshot(self) -> None:
        with self.app.session.reading("snapshot") as store:
            if store is None:
                return
            snapshot = self.read_snapshot(store)
        if not get_current_worker().is_cancelled:
            self.app.post_message(SnapshotLoaded(snapshot))

    def read_snapshot(self, store: Any) -> Snapshot:
        view = self.app.session.read_view(store, self._selected_problem())
        problem = view.problem
        # Wrapping a long transcript takes milliseconds: done here, off the UI thread, on every change.
        width = max(60, self.app.size.width - 38)  # the detail pane's text width, known while its tab is hidden
        running, ask = problem in self.app.agents, self.app.asks.get(problem or "")
        lines = agent_lines(problem, view.agent_session, view.agent_events, view.guidance, running, width, ask)
        return Snapshot(view.problems, view.versions, problem, view.pending, view.guidance, lines)

    def _selected_problem(self) -> str | None:
        """Read from worker threads: the UI thread keeps `wanted_problem` current, no widget is touched."""
        return self.app.wanted_problem or self.app.snapshot.problem

    def show_snapshot(self, snapshot: Snapshot) -> None:
        if self._left_since(snapshot):
            return  # the problem the person moved to since is being read: it takes the view, not this one
        changed_problem = snapshot.problem != self.app.snapshot.problem
        self.app.snapshot = snapshot
        self.app.query_one("#problems", ProblemTable).show(snapshot.problems, snapshot.problem)
        table = self.app.query_one("#versions", VersionTable)
        table.show(filter_rows(snapshot.versions, self.app.version_filter), changed_problem, snapshot.versions)
        self.app.query_one("#versions-title", Static).update(self._versions_title(snapshot))
        self.show_agent()
        self.app.update_status()
        self.app.call_after_refresh(self.app.start_scheduler)
        selected = table.selected
        if selected is None:
            self.app.detail = None
            self.app.query_one("#rungs-view", RungsPane).show(None)
        elif self.app.detail is None or self._detail_stale(selected):
            self.load_detail(selected)

    def _versions_title(self, snapshot: Snapshot) -> Text:
        title = shown(f" {snapshot.problem or 'no problems yet'}", style="bold", limit=80)
        if self.app.version_filter != "all":
            title.append(f"  [{self.app.version_filter}: f for the next filter]", style="yellow")
        problem_row = next((p for p in snapshot.problems if p["name"] == snapshot.problem), None)
        if problem_row and problem_row.get("description"):
            title.append_text(shown(f" · {first_line(problem_row['description'], 90)}", style="dim"))
        if problem_row and problem_row.get("error"):
            title.append_text(shown(f"   ⚠ {first_line(problem_row['error'], 120)}", style="red"))
        if not snapshot.problems:
            title.append_text(shown(f"  (add <problem>/problem.py under {self.app.workspace.root})", style="dim"))
        return title

    def _left_since(self, snapshot: Snapshot) -> bool:
        """A reading of another problem than the one wanted now (the person moved on while it was read). Each move
        asks for a reading of its own (problem_highlighted), so one of the wanted problem is on its way."""
        wanted = self.app.wanted_problem
        return wanted is not None and snapshot.problem != wanted and any(p["name"] == wanted for p in snapshot.problems)

    def show_agent(self) -> None:
        self.app.query_one("#agent-view", AgentPane).show(self.app.snapshot.agent_lines)

    def _detail_stale(self, row: dict[str, Any]) -> bool:
        assert self.app.detail is not None
        old = self.app.detail.version
        keys = ["version_id", "evaluation_id", "status", "last_rung", "verdict", "verdict_reason", "deleted"]
        keys.append("profile_id")  # a profile finished beside the evaluation
        return any(old.get(k) != row.get(k) for k in keys)

    def version_highlighted(self) -> None:
        row = self.app.query_one("#versions", VersionTable).selected
        if row is not None and (
            self.app.detail is None or self.app.detail.version.get("name") != row["name"] or self._detail_stale(row)
        ):
            self.load_detail(row)

    def problem_highlighted(self, name: str | None) -> None:
        """Every move is a wish of its own: back on the problem shown while another's versions were being read, that
        reading must not take the view."""
        if name != self.app.snapshot.problem or name != self.app.wanted_problem:
            self.app.wanted_problem = name
            self.load_snapshot()

    def showing_highlighted(self) -> bool:
        """Whether the view shows the problem highlighted: keys act on what the person sees highlighted, so while
        its versions are still being read they do nothing (and say so)."""
        table = next(self.app.query("#problems").results(ProblemTable), None)  # gone once shutdown began
        highlighted = table.selected if table is not None else None
        if highlighted is not None and highlighted != self.app.snapshot.problem:
            self.app.notify(f"{highlighted}'s versions are still being read: press the key again", timeout=3)
            return False
        return True

    def load_detail(self, row: dict[str, Any]) -> None:
        pane = self.app.query_one("#rungs-view", RungsPane)
        self.app.rungs_width = max(60, pane.scrollable_content_region.width - 4)
        self.app.rungs_expanded = pane.expanded
        self.app.run_worker(
            functools.partial(self._load_detail, row), thread=True, exclusive=True, group="detail", exit_on_error=False
        )

    def _load_detail(self, row: dict[str, Any]) -> None:
        with self.app.session.reading("detail") as store:
            if store is None:
                return
            marked = self.app.marked["version_id"] if self.app.marked else None
            snapshot = self.app.snapshot
            detail = self.app.session.read_detail(store, row, snapshot.problem or "", snapshot.versions, marked)
        for target in detail.compare:
            detail.diffs[target] = diff_for(detail, target)
        detail.rung_lines = detail_lines(detail, self.app.rungs_expanded, self.app.rungs_width)
        if not get_current_worker().is_cancelled:
            self.app.post_message(DetailLoaded(detail))

    def show_detail(self, detail: Detail | None) -> None:
        old = self.app.detail
        same = old is not None and detail is not None and old.version["name"] == detail.version["name"]
        self.app.detail = detail
        rungs = self.app.query_one("#rungs-view", RungsPane)
        profile = self.app.query_one("#profile-view", ProfilePane)
        if detail is None:
            rungs.show(None)
            profile.show(None, [])
        else:
            rungs.set_lines(detail.rung_lines, keep_scroll=same)
            profile.show(detail.version, detail.rungs, detail.best_profile)
        self.show_diff()
        self.app.stale_panes = {"trends", "asm"}
        self.refresh_active_pane()

    def refresh_active_pane(self) -> None:
        """Trends and Asm cost a plot or a file read: drawn when shown, not on every cursor move."""
        active = self.app.query_one("#detail", TabbedContent).active
        detail = self.app.detail
        if detail is None or active not in self.app.stale_panes:
            return
        self.app.stale_panes.discard(active)
        if active == "trends":
            trends = self.app.query_one("#trends-view", TrendsPane)
            trends.show(self.app.snapshot.problem, detail.trends, detail.resources)
        elif active == "asm":
            previous = detail.compare.get("previous")
            self.app.query_one("#asm-pane", AsmPane).show(
                detail.version,
                detail.source,
                detail.artifacts,
                previous["name"] if previous else "",
                detail.compare_artifacts.get("previous", []),
                kernel_specs(detail.rungs),
            )

    def show_diff(self) -> None:
        pane = self.app.query_one("#diff-view", DiffPane)
        title = self.app.query_one("#diff-title", Static)
        detail = self.app.detail
        if detail is None:
            pane.set_lines([])
            return
        header = shown(f" {detail.version['name']} vs {pane.target}", style="bold", limit=80)
        header.append(f"   d cycles: {' · '.join(targets_of(detail))}", style="dim")
        header.append("   m marks a version to compare with", style="dim")
        title.update(header)
        lines = detail.diffs.get(pane.target)
        pane.set_lines(lines if lines is not None else diff_for(detail, pane.target))

    def active_view(self) -> TextView | None:
        tab = self.app.query_one("#detail", TabbedContent).active
        views = {
            "rungs": "#rungs-view",
            "diff": "#diff-view",
            "asm": "#asm-view",
            "profile": "#profile-view",
            "agent": "#agent-view",
        }
        return self.app.query_one(views[tab], TextView) if tab in views else None

    def tell_finished(self, event: SchedulerEvent) -> None:
        """A new best, or a passing version flagged: said in the dashboard and where [notify] sends it."""
        problem, version = event.problem, event.version
        name = f"{problem} {version}"
        if event.data.get("beat_best"):
            how = "raced back to back" if event.data.get("race") else f"by {TIME_NAME}"
            faster = f"{event.data.get('vs_best') or 0:.2f}× faster ({how})"
            self.app.tell(Notice("best", f"{name} beats the best", faster, problem, version))
        flags = event.data.get("flags") or []
        if event.data.get("status") == "pass" and flags:
            said = ", ".join(map(str, flags))
            self.app.tell(Notice("flagged", f"{name} passes, flagged", said, problem, version), "warning")

    def scheduler_said(self, event: SchedulerEvent) -> None:
        """The queue's and the judges' news: the device, what runs, a new best or an empty queue said, then the
        status line at once and the history read again."""
        app = self.app
        if event.kind == "judge":
            app.device = event.data.get("device")
        elif event.kind == "started":
            app.running += 1
        elif event.kind in ("finished", "failed"):
            app.running = max(0, app.running - 1)
            self.tell_finished(event)
        elif event.kind == "idle" and not app.agents:  # with an agent at work the queue empties every version
            app.tell(Notice("queue-empty", "queue empty", "every version is judged"))
        elif event.kind == "warning":
            app.notify(str(event.data.get("message")), severity="warning", timeout=10, markup=False)
        elif event.kind == "deferred":
            app.deferred_to = event.data.get("pid")
            app.notify(
                f"kerneltui pid {app.deferred_to} already judges this workspace: its results show here",
                timeout=10,
                markup=False,
            )
        app.update_status()  # each judge's load, at once: the snapshot read comes after
        self.load_snapshot()
