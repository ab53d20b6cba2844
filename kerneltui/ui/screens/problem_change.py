"""A problem's files changed on disk, as a diff against the accepted ones: y accepts them (judged against from
now), n or Esc leaves them unaccepted."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

from kerneltui.ui.widgets.format import shown, shown_lines
from kerneltui.ui.widgets.text_view import TextView

DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def diff_lines(diff: str) -> list[Text]:
    """The diff's lines, coloured by kind; written out safely (the changed files are anyone's text)."""
    lines = [
        Text(line, style=next((s for mark, s in DIFF_STYLES if line.startswith(mark)), ""))
        for line in diff.splitlines()
    ]
    return shown_lines(lines) or [Text("(no difference in text)", style="dim")]


class ProblemChangeScreen(ModalScreen[bool]):
    BINDINGS = [Binding("y", "answer(True)", "accept"), Binding("n,escape", "answer(False)", "leave")]
    DEFAULT_CSS = """
    ProblemChangeScreen { align: center middle; }
    ProblemChangeScreen > #change-title { dock: top; height: 1; background: $panel; padding: 0 1; }
    ProblemChangeScreen > TextView { height: 1fr; }
    """

    def __init__(self, problem: str, diff: str) -> None:
        super().__init__()
        self.problem, self.diff = problem, diff

    def compose(self) -> ComposeResult:
        title = f" {self.problem}: its files changed on disk. y accepts them (judged against from now), n leaves them"
        yield Static(shown(title, style="bold", limit=300), id="change-title")
        yield TextView(id="change-view")

    def on_mount(self) -> None:
        view = self.query_one(TextView)
        view.set_lines(diff_lines(self.diff))
        view.focus()

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
