"""The workspace's problems: newest version and status, best % of roofline, queued work."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from kerneltui.ui.widgets.format import STATUS


def problem_cells(row: dict[str, Any]) -> tuple[Text, Text, Text]:
    name = Text(row["name"], style="bold")
    if row.get("error"):
        name.append(" ⚠", style="red")
    latest = row.get("latest_version") or "·"
    status = row.get("latest_status")
    glyph, style = STATUS.get(str(status), ("◐", "yellow") if status == "running" else ("·", "dim"))
    state = Text(f"{latest} {glyph.split()[0]}", style=style)
    if row.get("pending"):
        state.append(f" +{row['pending']}", style="yellow")
    best = row.get("best_pct")
    best_text = Text(f"{best:.0f}% ★", style="yellow") if best is not None else Text("·", style="dim")
    return name, state, best_text


class ProblemTable(DataTable[Text]):
    BINDINGS = [Binding("j", "cursor_down", "down", show=False), Binding("k", "cursor_up", "up", show=False)]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", show_header=True, **kwargs)
        self.names: list[str] = []
        self.cells: dict[str, tuple[str, ...]] = {}

    def on_mount(self) -> None:
        self.add_column("problem", key="name", width=10)
        self.add_column("latest", key="latest", width=10)
        self.add_column("best", key="best", width=6)

    @property
    def selected(self) -> str | None:
        if not self.names or not 0 <= self.cursor_row < len(self.names):
            return None
        return self.names[self.cursor_row]

    def show(self, rows: list[dict[str, Any]]) -> None:
        names = [r["name"] for r in rows]
        fresh = {r["name"]: problem_cells(r) for r in rows}
        if names != self.names:
            keep = self.selected
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
                    for column, cell in zip(("name", "latest", "best"), cells, strict=True):
                        self.update_cell(name, column, cell)
        self.cells = {k: tuple(c.plain for c in v) for k, v in fresh.items()}
