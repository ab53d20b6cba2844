"""Loading what the screen shows: the history read in worker threads, shown pane by pane."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.widgets import DataTable, Static, TabbedContent
from textual.worker import get_current_worker

from kerneltui.ui.base import DashboardBase, while_running
from kerneltui.ui.messages import DetailLoaded, Snapshot, SnapshotLoaded
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


class PaneLoading(DashboardBase):
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
        if self._left_since(snapshot):
            return  # the problem the person moved to since is being read: it takes the view, not this one
        changed_problem = snapshot.problem != self.snapshot.problem
        self.snapshot = snapshot
        self.query_one("#problems", ProblemTable).show(snapshot.problems, snapshot.problem)
        table = self.query_one("#versions", VersionTable)
        table.show(filter_rows(snapshot.versions, self.version_filter), changed_problem, snapshot.versions)
        self.query_one("#versions-title", Static).update(self._versions_title(snapshot))
        self._show_agent()
        self._update_status()
        self.call_after_refresh(self.start_scheduler)
        selected = table.selected
        if selected is None:
            self.detail = None
            self.query_one("#rungs-view", RungsPane).show(None)
        elif self.detail is None or self._detail_stale(selected):
            self.load_detail(selected)

    def _versions_title(self, snapshot: Snapshot) -> Text:
        title = shown(f" {snapshot.problem or 'no problems yet'}", style="bold", limit=80)
        if self.version_filter != "all":
            title.append(f"  [{self.version_filter}: f for the next filter]", style="yellow")
        problem_row = next((p for p in snapshot.problems if p["name"] == snapshot.problem), None)
        if problem_row and problem_row.get("description"):
            title.append_text(shown(f" · {first_line(problem_row['description'], 90)}", style="dim"))
        if problem_row and problem_row.get("error"):
            title.append_text(shown(f"   ⚠ {first_line(problem_row['error'], 120)}", style="red"))
        if not snapshot.problems:
            title.append_text(shown(f"  (add <problem>/problem.py under {self.workspace.root})", style="dim"))
        return title

    def _left_since(self, snapshot: Snapshot) -> bool:
        """A reading of another problem than the one wanted now (the person moved on while it was read). Each move
        asks for a reading of its own (problem_highlighted), so one of the wanted problem is on its way."""
        wanted = self.wanted_problem
        return wanted is not None and snapshot.problem != wanted and any(p["name"] == wanted for p in snapshot.problems)

    def _show_agent(self) -> None:
        self.query_one("#agent-view", AgentPane).show(self.snapshot.agent_lines)

    def _detail_stale(self, row: dict[str, Any]) -> bool:
        assert self.detail is not None
        old = self.detail.version
        keys = ["version_id", "evaluation_id", "status", "last_rung", "verdict", "verdict_reason", "deleted"]
        keys.append("profile_id")  # a profile finished beside the evaluation
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
        """Every move is a wish of its own: back on the problem shown while another's versions were being read, that
        reading must not take the view."""
        name = event.row_key.value
        if name != self.snapshot.problem or name != self.wanted_problem:
            self.wanted_problem = name
            self.load_snapshot()

    def showing_highlighted(self) -> bool:
        """Whether the view shows the problem highlighted: keys act on what the person sees highlighted, so while
        its versions are still being read they do nothing (and say so)."""
        table = next(self.query("#problems").results(ProblemTable), None)  # gone once shutdown began
        highlighted = table.selected if table is not None else None
        if highlighted is not None and highlighted != self.snapshot.problem:
            self.notify(f"{highlighted}'s versions are still being read: press the key again", timeout=3)
            return False
        return True

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
            marked = self.marked["version_id"] if self.marked else None
            detail = self.session.read_detail(store, row, self.snapshot.problem or "", self.snapshot.versions, marked)
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
        profile = self.query_one("#profile-view", ProfilePane)
        if detail is None:
            rungs.show(None)
            profile.show(None, [])
        else:
            rungs.set_lines(detail.rung_lines, keep_scroll=same)
            profile.show(detail.version, detail.rungs)
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
            self.query_one("#trends-view", TrendsPane).show(self.snapshot.problem, detail.trends, detail.resources)
        elif active == "asm":
            previous = detail.compare.get("previous")
            self.query_one("#asm-pane", AsmPane).show(
                detail.version,
                detail.source,
                detail.artifacts,
                previous["name"] if previous else "",
                detail.compare_artifacts.get("previous", []),
                kernel_specs(detail.rungs),
            )

    def _show_diff(self) -> None:
        pane = self.query_one("#diff-view", DiffPane)
        title = self.query_one("#diff-title", Static)
        detail = self.detail
        if detail is None:
            pane.set_lines([])
            return
        header = shown(f" {detail.version['name']} vs {pane.target}", style="bold", limit=80)
        header.append(f"   d cycles: {' · '.join(targets_of(detail))}", style="dim")
        header.append("   m marks a version to compare with", style="dim")
        title.update(header)
        lines = detail.diffs.get(pane.target)
        pane.set_lines(lines if lines is not None else diff_for(detail, pane.target))

    def select_problem(self, name: str) -> None:
        self.wanted_problem = name
        table = self.query_one("#problems", ProblemTable)
        if name in table.names:
            table.move_cursor(row=table.names.index(name))

    def active_view(self) -> TextView | None:
        tab = self.query_one("#detail", TabbedContent).active
        views = {
            "rungs": "#rungs-view",
            "diff": "#diff-view",
            "asm": "#asm-view",
            "profile": "#profile-view",
            "agent": "#agent-view",
        }
        return self.query_one(views[tab], TextView) if tab in views else None
