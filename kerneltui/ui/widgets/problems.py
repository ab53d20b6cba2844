"""The workspace's problems: newest version and status, best % of roofline, queued work."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from harness.contract.text import printable
from kerneltui.ui.widgets.format import STATUS, shown


def problem_cells(row: dict[str, Any]) -> tuple[Text, Text, Text]:
    name = shown(row["name"], style="bold", limit=MAX_NAME_WIDTH)
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


MAX_NAME_WIDTH = 60
WIDE_FROM = 170  # terminal columns: past these, the names widen into what is left (the versions table has enough)
LATEST_AND_BORDERS = 16  # while filtering: the latest column, the cells' padding and the pane's border
LEFT_FOR_VERSIONS = 20  # columns the versions table keeps while the problems pane is widened


def pane_width(terminal_width: int) -> int:
    """The problems pane's width: narrower below NARROW_BELOW columns, leaving the versions table room."""
    return PANE_WIDTH if terminal_width >= NARROW_BELOW else NARROW_PANE_WIDTH


def counts_title(rows: list[dict[str, Any]], shown: int) -> str:
    """The list's title: how many problems (of how many, under a filter), and their newest versions' verdicts by
    kind (pass, fail, unverified, being judged), those with none left out: "100: 37✓ 12✗ 3◐"."""
    kinds = {"✓": ("pass",), "✗": ("fail", "error"), "?": ("unverified",), "◐": ("running", "queued")}
    found = [f"{sum(r.get('latest_status') in statuses for r in rows)}{mark}" for mark, statuses in kinds.items()]
    head = f"{shown} of {len(rows)}" if shown != len(rows) else f"{len(rows)}"
    return " ".join([f"{head}:", *[f for f in found if not f.startswith("0")]]) if rows else ""


def matching(rows: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """The rows whose name holds `text`, case aside (every row for no text)."""
    wanted = text.strip().casefold()
    return [r for r in rows if wanted in str(r["name"]).casefold()] if wanted else rows


class ProblemTable(DataTable[Text]):
    BINDINGS = [Binding("j", "cursor_down", "down", show=False), Binding("k", "cursor_up", "up", show=False)]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", show_header=True, **kwargs)
        self.names: list[str] = []
        self.cells: dict[str, tuple[str, ...]] = {}
        self.rows_shown: list[dict[str, Any]] = []
        self.rows_all: list[dict[str, Any]] = []  # before the filter
        self.filter_text = ""  # typed after / on this list: only the problems whose name holds it
        self.terminal_width = NARROW_BELOW
        self.columns_shown: tuple[tuple[str, str, int], ...] = COLUMNS

    def on_mount(self) -> None:
        self._add_columns()

    def fit(self, terminal_width: int) -> None:
        """Sized for the terminal: the pane's width, and its columns (the best % goes below NARROW_BELOW). While a
        filter is on, the pane widens to the full names it leaves (up to half the terminal)."""
        self.terminal_width = terminal_width
        columns = COLUMNS if terminal_width >= NARROW_BELOW else NARROW_COLUMNS
        width = pane_width(terminal_width)
        wide = self.wide_name_width(terminal_width)
        # names in full as far as a wide terminal has room
        if terminal_width > WIDE_FROM and wide > columns[0][2] and not self.filter_text:
            columns = (("name", "problem", wide), *columns[1:])
            width += wide - COLUMNS[0][2]
        if self.filter_text:  # the names in full, beside their latest version: what finding a problem needs
            longest = max((len(str(r["name"])) for r in matching(self.rows_all, self.filter_text)), default=0)
            room = terminal_width - LEFT_FOR_VERSIONS - LATEST_AND_BORDERS
            name_width = max(NARROW_COLUMNS[0][2], min(MAX_NAME_WIDTH, longest, room))
            columns = (("name", f"problem ~{self.filter_text[:12]}", name_width), NARROW_COLUMNS[1])
            width = max(width, name_width + LATEST_AND_BORDERS)
        self.styles.width = width
        if columns == self.columns_shown:
            return
        self.columns_shown = columns
        keep = self.selected
        self.clear(columns=True)
        self._add_columns()
        self.names = []
        self.show(self.rows_all, keep)  # rebuilt there, the cursor back on `keep`

    def wide_name_width(self, terminal_width: int) -> int:
        """The name column on a terminal wider than WIDE_FROM: the longest name, up to the columns past it."""
        if terminal_width <= WIDE_FROM:
            return COLUMNS[0][2]
        longest = max((len(str(r["name"])) for r in self.rows_all), default=0)
        return max(COLUMNS[0][2], min(MAX_NAME_WIDTH, longest, COLUMNS[0][2] + terminal_width - WIDE_FROM))

    def set_filter(self, text: str) -> list[str]:
        """Only the problems whose name holds `text` (none: all), the pane fitted to them; the names left."""
        self.filter_text = text.strip()
        self.fit(self.terminal_width)
        self.show(self.rows_all, self.selected)
        return list(self.names)

    def _add_columns(self) -> None:
        for key, label, width in self.columns_shown:
            self.add_column(label, key=key, width=width)

    @property
    def selected(self) -> str | None:
        if not self.names or not 0 <= self.cursor_row < len(self.names):
            return None
        return self.names[self.cursor_row]

    def show(self, rows: list[dict[str, Any]], shown: str | None = None) -> None:
        """The problems' rows (those the filter leaves); `shown`, the problem the dashboard shows, is where the
        cursor goes if rebuilt."""
        grew = self.wide_name_width(self.terminal_width)
        self.rows_all = rows
        if self.wide_name_width(self.terminal_width) != grew and not self.filter_text:
            self.fit(self.terminal_width)  # a longer name came: the column is fitted again (and shown there)
            return
        rows = matching(rows, self.filter_text)
        self.rows_shown = rows
        self.border_title = counts_title(self.rows_all, len(rows))
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
