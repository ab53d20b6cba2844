"""A version's source as it was judged, numbered and highlighted; Esc closes it."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

from kerneltui.ui.widgets.format import highlighted, shown
from kerneltui.ui.widgets.text_view import TextView


def source_lines(source: str) -> list[Text]:
    """Numbered lines, highlighted as Python (Text, never markup: brackets in the code stay as they are), each
    cut before it is highlighted."""
    lines = highlighted(source, background=None)
    width = len(str(max(1, len(lines))))
    numbered_lines = []
    for number, line in enumerate(lines, 1):
        numbered = Text(f"{number:>{width}}  ", style="dim")
        numbered.append_text(line)
        numbered_lines.append(numbered)
    return numbered_lines or [Text("(empty)", style="dim")]


class SourceScreen(ModalScreen[tuple[int, int] | None]):
    """Dismissed with the lines chosen (0-based, inclusive) when C asks to comment on them."""

    BINDINGS = [Binding("escape,v,q", "close", "close"), Binding("C", "comment", "comment on the chosen lines")]
    DEFAULT_CSS = """
    SourceScreen { align: center middle; }
    SourceScreen > #source-title { dock: top; height: 1; background: $panel; padding: 0 1; }
    SourceScreen > TextView { height: 1fr; }
    """

    def __init__(self, title: str, source: str) -> None:
        super().__init__()
        self.title_text, self.source = title, source

    def compose(self) -> ComposeResult:
        yield Static(shown(self.title_text, style="bold", limit=300), id="source-title")
        yield TextView(id="source-view")

    def on_mount(self) -> None:
        view = self.query_one(TextView)
        view.set_lines(source_lines(self.source))
        view.focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_comment(self) -> None:
        chosen = self.query_one(TextView).selected()
        if chosen is None:
            self.notify("choose lines first: ↑/↓, shift+↑/↓ for a range; then C", timeout=5)
            return
        self.dismiss(chosen)
