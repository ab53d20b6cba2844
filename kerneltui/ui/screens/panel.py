"""A full-screen panel over the dashboard: one scrolling Static that its screen fills and refreshes; Esc closes."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class PanelScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    PanelScreen { align: center middle; }
    PanelScreen > VerticalScroll { width: 100%; height: 100%; background: $surface; padding: 0 1; }
    """
    PANEL_ID = "panel"
    WAITING = "reading…"

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(self.WAITING, style="dim"), id=self.PANEL_ID)

    def draw(self, shown: RenderableType) -> None:
        if self.is_mounted:
            self.query_one(f"#{self.PANEL_ID}", Static).update(shown)

    def action_close(self) -> None:
        self.dismiss(None)
