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
    ]

    query_text: reactive[str] = reactive("", init=False)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lines: list[Text] = []
        self.matches: list[tuple[int, int, int]] = []
        self.matches_by_line: dict[int, list[tuple[int, int, int]]] = {}
        self.current = -1
        self._width = 0

    def set_lines(self, lines: list[Text], keep_scroll: bool = False) -> None:
        lines = shown_lines(lines)
        for line in lines:
            if "\t" in line.plain:
                line.expand_tabs(8)
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
        if spans:
            text = text.copy()
            for start, end, i in spans:
                text.stylize(CURRENT_MATCH_STYLE if i == self.current else MATCH_STYLE, start, end)
        segments = list(text.render(self.app.console))
        segments = [Segment(s.text.replace("\n", ""), s.style) for s in segments if s.text != "\n"]
        return Strip(Segment.apply_style(segments, self.rich_style))  # the pane's background under the text
