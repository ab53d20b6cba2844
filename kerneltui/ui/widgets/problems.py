"""The workspace's problems: newest version and status, best % of roofline, queued work."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from harness.contract.text import printable
from kerneltui.ui.widgets.format import STATUS, shown


def problem_cells(row: dict[str, Any]) -> tuple[Text, Text, Text]:
    name = shown(row["name"], style="bold", limit=60)
    if row.get("error"):
        name.append(" ⚠", style="red")
    latest = printable(str(row.get("latest_version") or "·"))[:20]
    status = row.get("latest_status")
    glyph, style = STATUS.get(str(status), ("◐", "yellow") if status == "running" else ("·", "dim"))
    state = Text(f"{latest} {glyph.split()[0]}", style=style)
    if row.get("pending"):
        state.append(f" +{row['pending']}", style="yellow")
    best = row.get("best_pct")
    best_text = Text(f"{best:.0f}% ★", style="yellow") if best is not None else Text("·", style="dim")
    return name, state, best_text


# (key, label, width); on a narrow terminal the pane is narrower and the best % of roofline gives way
COLUMNS = (("name", "problem", 10), ("latest", "latest", 10), ("best", "best", 6))
NARROW_COLUMNS = (("name", "problem", 9), ("latest", "latest", 9))
NARROW_BELOW = 100  # terminal columns
PANE_WIDTH, NARROW_PANE_WIDTH = 34, 26


def pane_width(terminal_width: int) -> int:
    """The problems pane's width: narrower below NARROW_BELOW columns, leaving the versions table room."""
    return PANE_WIDTH if terminal_width >= NARROW_BELOW else NARROW_PANE_WIDTH


class ProblemTable(DataTable[Text]):
    BINDINGS = [Binding("j", "cursor_down", "down", show=False), Binding("k", "cursor_up", "up", show=False)]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", show_header=True, **kwargs)
        self.names: list[str] = []
        self.cells: dict[str, tuple[str, ...]] = {}
        self.rows_shown: list[dict[str, Any]] = []
        self.columns_shown: tuple[tuple[str, str, int], ...] = COLUMNS

    def on_mount(self) -> None:
        self._add_columns()

    def fit(self, terminal_width: int) -> None:
        """Sized for the terminal: the pane's width, and its columns (the best % goes below NARROW_BELOW)."""
        self.styles.width = pane_width(terminal_width)
        columns = COLUMNS if terminal_width >= NARROW_BELOW else NARROW_COLUMNS
        if columns == self.columns_shown:
            return
        self.columns_shown = columns
        keep = self.selected
        self.clear(columns=True)
        self._add_columns()
        self.names = []
        self.show(self.rows_shown, keep)  # rebuilt there, the cursor back on `keep`

    def _add_columns(self) -> None:
        for key, label, width in self.columns_shown:
            self.add_column(label, key=key, width=width)

    @property
    def selected(self) -> str | None:
        if not self.names or not 0 <= self.cursor_row < len(self.names):
            return None
        return self.names[self.cursor_row]

    def show(self, rows: list[dict[str, Any]], shown: str | None = None) -> None:
        """The problems' rows; `shown`, the problem the dashboard shows, is where the cursor goes if rebuilt."""
        self.rows_shown = rows
        names = [r["name"] for r in rows]
        count = len(self.columns_shown)
        fresh = {r["name"]: problem_cells(r)[:count] for r in rows}
        if names != self.names:
            keep = shown if shown in names else self.selected
            # Rebuilt, the table highlights its first row: not the person choosing a problem (the view jumped there
            # whenever a problem folder was added). The cursor goes to the problem shown, saying nothing.
            with self.prevent(DataTable.RowHighlighted):
                self.clear()
                for name in names:
                    self.add_row(*fresh[name], key=name)
                self.names = names
                if keep in names:
                    self.move_cursor(row=names.index(keep), animate=False)
        else:
            for name, cells in fresh.items():
                plain = tuple(c.plain for c in cells)
                if self.cells.get(name) != plain:
                    for (column, _, _), cell in zip(self.columns_shown, cells, strict=True):
                        self.update_cell(name, column, cell)
        self.cells = {k: tuple(c.plain for c in v) for k, v in fresh.items()}
