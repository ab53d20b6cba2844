"""A read-only, searchable view of many styled lines (rung logs, diffs, PTX/SASS).

It renders only the lines on screen (Textual's line API), so a 50,000-line SASS listing scrolls as
fast as a short one. Text arrives as rich Text objects, never as markup: brackets in a kernel's
output or an agent's note show as they are; every line passes through format.shown (control characters written
out, long lines and views cut) whoever built it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from kerneltui.ui.widgets.format import shown_lines, text_lines

MATCH_STYLE = Style(bgcolor="yellow", color="black")
CURRENT_MATCH_STYLE = Style(bgcolor="dark_orange", color="black", bold=True)
SELECTED_STYLE = Style(bgcolor="grey35")


class MatchMoved(Message):
    """The current search match changed (the pane updates its 'n of m' label)."""

    def __init__(self, view: TextView) -> None:
        super().__init__()
        self.view = view


class TextView(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    TextView { background: $surface; }
    """
    BINDINGS = [
        Binding("n", "next_match", "next match", show=False),
        Binding("N", "previous_match", "previous match", show=False),
        Binding("j", "scroll_down", show=False),
        Binding("k", "scroll_up", show=False),
        Binding("g", "scroll_home", show=False),
        Binding("G", "scroll_end", show=False),
        Binding("down", "move_cursor(1)", "line below", show=False),
        Binding("up", "move_cursor(-1)", "line above", show=False),
        Binding("shift+down", "move_cursor(1, True)", "select down", show=False),
        Binding("shift+up", "move_cursor(-1, True)", "select up", show=False),
    ]

    query_text: reactive[str] = reactive("", init=False)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lines: list[Text] = []
        self.matches: list[tuple[int, int, int]] = []
        self.matches_by_line: dict[int, list[tuple[int, int, int]]] = {}
        self.current = -1
        self._width = 0
        self.chosen_line: int | None = None  # a line chosen with the arrows (a comment is on it), and the other end
        self.chosen_from: int | None = None  # of a range chosen with shift

    def set_lines(self, lines: list[Text], keep_scroll: bool = False) -> None:
        lines = shown_lines(lines)
        for line in lines:
            if "\t" in line.plain:
                line.expand_tabs(8)
        if not keep_scroll or len(lines) != len(self.lines):
            self.chosen_line = self.chosen_from = None
        self.lines = lines
        self._width = max((line.cell_len for line in lines), default=0)
        self.virtual_size = Size(self._width, len(lines))
        self._render_cached.cache_clear()
        if self.query_text:
            self._find(self.query_text, jump=False)
        if not keep_scroll:
            self.scroll_to(0, 0, animate=False)
        self.refresh()

    def set_text(self, text: str, style: str = "") -> None:
        self.set_lines(text_lines(text, style))

    @property
    def plain(self) -> str:
        return "\n".join(line.plain for line in self.lines)

    # --- search --------------------------------------------------------------------------------

    def search(self, query: str) -> int:
        """Highlights every match of query (a regular expression, else literal text); jumps to the first."""
        self.query_text = query
        return self._find(query, jump=True)

    def _find(self, query: str, jump: bool) -> int:
        self.matches = []
        self.matches_by_line = {}
        self.current = -1
        if query:
            try:
                pattern = re.compile(query, re.IGNORECASE)
            except re.error:
                pattern = re.compile(re.escape(query), re.IGNORECASE)
            for number, line in enumerate(self.lines):
                found = [(m.start(), m.end()) for m in pattern.finditer(line.plain) if m.end() > m.start()]
                for start, end in found:
                    self.matches_by_line.setdefault(number, []).append((start, end, len(self.matches)))
                    self.matches.append((number, start, end))
        self._render_cached.cache_clear()
        if self.matches and jump:
            self._go(0)
        self.refresh()
        return len(self.matches)

    def match_label(self) -> str:
        if not self.query_text:
            return ""
        if not self.matches:
            return f"/{self.query_text}  no matches"
        return f"/{self.query_text}  {self.current + 1} of {len(self.matches)} matches"

    def action_next_match(self) -> None:
        if self.matches:
            self._go((self.current + 1) % len(self.matches))

    def action_previous_match(self) -> None:
        if self.matches:
            self._go((self.current - 1) % len(self.matches))

    def _go(self, index: int) -> None:
        self.current = index
        line, start, end = self.matches[index]
        self._render_cached.cache_clear()
        self.scroll_to_region(Region(start, line, max(1, end - start), 1), animate=False, center=True)
        self.refresh()
        self.post_message(MatchMoved(self))

    # --- a line or a range chosen -------------------------------------------------------------------

    def action_move_cursor(self, step: int, extend: bool = False) -> None:
        """The arrows move a chosen line (from the top line shown), shift with them chooses a range."""
        if not self.lines:
            return
        if self.chosen_line is None:
            self.chosen_line, self.chosen_from = min(int(self.scroll_offset.y), len(self.lines) - 1), None
        else:
            if extend and self.chosen_from is None:
                self.chosen_from = self.chosen_line
            elif not extend:
                self.chosen_from = None
            self.chosen_line = max(0, min(len(self.lines) - 1, self.chosen_line + step))
        self.scroll_to_region(Region(0, self.chosen_line, 1, 1), animate=False)
        self._render_cached.cache_clear()
        self.refresh()

    def selected(self) -> tuple[int, int] | None:
        """The chosen lines (0-based, inclusive), None where none is."""
        if self.chosen_line is None:
            return None
        other = self.chosen_line if self.chosen_from is None else self.chosen_from
        return min(other, self.chosen_line), max(other, self.chosen_line)

    # --- rendering -----------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if index >= len(self.lines):
            return Strip.blank(width, self.rich_style)
        strip = self._render_cached(index)
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)

    @lru_cache(maxsize=4096)  # noqa: B019  (cleared whenever lines or matches change)
    def _render_cached(self, index: int) -> Strip:
        text = self.lines[index]
        spans = self.matches_by_line.get(index, [])
        chosen = self.selected()
        if chosen and chosen[0] <= index <= chosen[1]:
            text = text.copy()
            text.stylize(SELECTED_STYLE)
        if spans:
            text = text.copy()
            for start, end, i in spans:
                text.stylize(CURRENT_MATCH_STYLE if i == self.current else MATCH_STYLE, start, end)
        segments = list(text.render(self.app.console))
        segments = [Segment(s.text.replace("\n", ""), s.style) for s in segments if s.text != "\n"]
        return Strip(Segment.apply_style(segments, self.rich_style))  # the pane's background under the text
