"""The selected problem's versions, newest first: status, errors, timings, roofline, verdict.

Updates change only the cells that changed; new versions appear at the top, and the cursor stays
on the version the person is reading unless it was on the newest (then it follows).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from harness.contract.units import TIME_NAME
from kerneltui.ui.widgets.format import (
    error_cell,
    first_line,
    may_be_best,
    number_cell,
    shown,
    status_cell,
    time_cell,
    verdict_cell,
)

# (key, label, width): fixed widths, so a cell that grows later (a verdict) is not cut off
COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("ver", "ver", 5),
    ("status", "status", 12),
    ("failed", "failed at", 11),
    ("err", "max err", 8),
    ("median", TIME_NAME, 10),
    ("spread", "±", 5),
    ("vsref", "vs ref", 7),
    ("vsbest", "vs best", 7),
    ("roof", "roofline", 8),
    ("verdict", "verdict", 16),
    ("note", "note", 20),  # takes what is left of the width (on_resize)
)
# Which columns stay when the table is narrow, most wanted first (the note takes what is left, if any).
PRIORITY = ("ver", "status", "failed", "median", "vsref", "roof", "verdict", "vsbest", "err", "spread", "note")
# With no timing in the table (no GPU), its timing columns are all "·": the verdict, the error and the note first.
UNTIMED_PRIORITY = ("ver", "status", "failed", "err", "verdict", "note", "median", "vsref", "roof", "vsbest", "spread")
MIN_NOTE = 10


def visible_columns(width: int, padding: int, timed: bool = True) -> tuple[list[int], int]:
    """Indices into COLUMNS that fit in `width` by PRIORITY (UNTIMED_PRIORITY where no row has a timing), in display
    order, and the note column's width."""
    sizes = {key: (w or 0) + 2 * padding for key, _, w in COLUMNS}
    sizes["note"] = MIN_NOTE + 2 * padding
    chosen: set[str] = set()
    used = 0
    for key in (
        PRIORITY if timed else UNTIMED_PRIORITY
    ):  # a prefix: never a lesser column where a more wanted one did not fit
        if used + sizes[key] > width and key != "ver":
            break
        chosen.add(key)
        used += sizes[key]
    note = width - used + MIN_NOTE if "note" in chosen else 0
    return [i for i, (key, _, _) in enumerate(COLUMNS) if key in chosen], note


FILTERS = ("all", "hide failed", "only approved")  # f cycles them


def filter_rows(rows: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    if name == "hide failed":
        return [r for r in rows if r.get("status") not in ("fail", "error")]
    if name == "only approved":
        return [r for r in rows if r.get("verdict") == "approved"]
    return rows


def best_median(rows: list[dict[str, Any]]) -> dict[str | None, float]:
    """The best median on each device: a time is only ever compared with times from the same kind of GPU."""
    best: dict[str | None, float] = {}
    for row in rows:
        median, device = row.get("median_us"), row.get("device_name")
        if median and may_be_best(row) and median < best.get(device, float("inf")):
            best[device] = median
    return best


def row_cells(row: dict[str, Any], bests: dict[str | None, float]) -> tuple[Text, ...]:
    median = row.get("median_us")
    best = bests.get(row.get("device_name"))
    if median and best and may_be_best(row) and median == best:
        vs_best = Text("★ best", style="bold yellow")
    elif row.get("race") and row.get("vs_best"):
        vs_best = race_cell(row["race"], row["vs_best"])
    elif median and best and may_be_best(row):
        vs_best = Text(f"{best / median:.2f}×")
    else:
        vs_best = Text("·", style="dim")
    name = shown(row["name"], style="dim strike" if row.get("deleted") else "bold", limit=40)
    note = first_line(row.get("notes"), 60)
    return (
        name,
        status_cell(row),
        shown(row.get("failed_rung") or "·", limit=40),
        error_cell(row.get("max_abs"), row),
        time_cell(median),
        number_cell(row.get("noise_pct"), "{:.1f}%"),
        number_cell(row.get("speedup"), "{:.2f}×"),
        vs_best,
        number_cell(row.get("roofline_pct"), "{:.0f}%"),
        verdict_cell(row),
        shown(note, style="italic"),
    )


RACE_MARKS = {"faster": ("▲", "green"), "slower": ("▼", "red"), "same": ("=", ""), "ambiguous": ("?", "yellow")}


def race_cell(label: str, vs_best: float) -> Text:
    """The label of the race against the best back to back, with the best's time over this one's."""
    mark, style = RACE_MARKS.get(label, ("?", "yellow"))
    return Text(f"{mark}{vs_best:.2f}×", style=style)


class VersionTable(DataTable[Text]):
    BINDINGS = [
        Binding("j", "cursor_down", "down", show=False),
        Binding("k", "cursor_up", "up", show=False),
        Binding("g", "scroll_top", "first", show=False),
        Binding("G", "scroll_bottom", "last", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.rows_by_key: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        self.cells: dict[str, tuple[tuple[str, str, tuple[Any, ...]], ...]] = {}
        self.note_width = 20
        self.shown_columns = list(range(len(COLUMNS)))
        self.timed = True  # some row has a median: timing columns come before the others when narrow

    def on_mount(self) -> None:
        self._add_columns()

    def on_resize(self) -> None:
        """Columns give way by PRIORITY on a narrow screen; the note takes what the others leave: no
        horizontal scrolling."""
        shown, note = visible_columns(self.scrollable_content_region.width - 2, self.cell_padding, self.timed)
        if (shown, note) == (self.shown_columns, self.note_width):
            return
        self.shown_columns, self.note_width = shown, note
        cursor = self.cursor_row
        self.clear(columns=True)
        self._add_columns()
        best = best_median(list(self.rows_by_key.values()))
        for key in self.order:
            self.add_row(*self._shown(row_cells(self.rows_by_key[key], best)), key=key)
        if self.order:
            self.move_cursor(row=min(cursor, len(self.order) - 1), animate=False)

    def _add_columns(self) -> None:
        for i in self.shown_columns:
            key, label, width = COLUMNS[i]
            self.add_column(label, key=key, width=self.note_width if key == "note" else width)

    def _shown(self, cells: tuple[Text, ...]) -> list[Text]:
        return [cells[i] for i in self.shown_columns]

    @property
    def selected(self) -> dict[str, Any] | None:
        if not self.order or self.cursor_row < 0 or self.cursor_row >= len(self.order):
            return None
        return self.rows_by_key.get(self.order[self.cursor_row])

    def show(self, rows: list[dict[str, Any]], reset: bool = False, every: list[dict[str, Any]] | None = None) -> None:
        """`rows` shown; `every` (all the problem's rows, when a filter hides some) decides the best."""
        best = best_median(rows if every is None else every)
        order = [r["name"] for r in rows]
        previous_key = None if reset or not self.order else self.order[min(self.cursor_row, len(self.order) - 1)]
        follow = reset or previous_key is None or previous_key == self.order[0]
        self.rows_by_key = {r["name"]: r for r in rows}
        fresh = {r["name"]: row_cells(r, best) for r in rows}
        if order != self.order or reset:
            self._rebuild(order, fresh)
            target = 0 if follow else (order.index(previous_key) if previous_key in order else 0)
            if order:
                self.move_cursor(row=target, animate=False)
        else:
            self._update_changed(fresh)
        timed = any(r.get("median_us") for r in (rows if every is None else every))
        if timed != self.timed:  # the columns that carry information here win the width
            self.timed = timed
            self.on_resize()

    def _rebuild(self, order: list[str], fresh: dict[str, tuple[Text, ...]]) -> None:
        self.clear()
        for key in order:
            self.add_row(*self._shown(fresh[key]), key=key)
        self.order = order
        self.cells = {k: tuple(map(_look, v)) for k, v in fresh.items()}

    def _update_changed(self, fresh: dict[str, tuple[Text, ...]]) -> None:
        for key, cells in fresh.items():
            looks = tuple(map(_look, cells))
            old = self.cells.get(key)
            if old == looks:
                continue
            for i, ((column, _, _), cell, now) in enumerate(zip(COLUMNS, cells, looks, strict=True)):
                if i in self.shown_columns and (old is None or old[i] != now):
                    self.update_cell(key, column, cell)
            self.cells[key] = looks


def _look(cell: Text) -> tuple[str, str, tuple[Any, ...]]:
    """What a cell shows: its text and its styles (a deleted version's name changes style alone)."""
    return cell.plain, str(cell.style), tuple(cell.spans)
