"""Small modal screens: a reason for a rejection, confirming quit while jobs run, and help."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class RejectScreen(ModalScreen[str | None]):
    """Asks why; Enter confirms (the reason may be empty), Esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, version: str) -> None:
        super().__init__()
        self.version = version

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(f"Reject {self.version}: why? (Enter confirms, Esc cancels)"))
            yield Input(placeholder="e.g. mask bug on odd sizes", id="reason")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmScreen(ModalScreen[bool]):
    """A question answered y (True) or n / Esc (False)."""

    BINDINGS = [Binding("y", "answer(True)", "yes"), Binding("n,escape", "answer(False)", "no")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self.question))

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class QuitScreen(ConfirmScreen):
    def __init__(self, pending: int, agents: int = 0) -> None:
        busy = [f"{pending} evaluation(s) queued or running"] if pending else []
        busy += [f"{agents} agent(s) working"] if agents else []
        super().__init__(
            f"{' and '.join(busy)}. Quit anyway? y / n\n"
            "(evaluations stay queued and resume when kerneltui starts again; agents stop)"
        )
        self.pending, self.agents = pending, agents


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "close")]

    def __init__(self, rows: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        text = Text("Keys (remap them in the config file by id)\n\n", style="bold")
        key_width = max((len(k) for k, _, _ in self.rows), default=10) + 2
        said_width = max((len(d) for _, d, _ in self.rows), default=30) + 2
        for keys, description, binding_id in self.rows:
            text.append(f"  {keys:<{key_width}}", style="bold yellow")
            text.append(f"{description:<{said_width}}")
            text.append(f"{binding_id}\n", style="dim")
        text.append("\nIn text panes: / search · n / N next and previous match · j / k scroll\n")
        text.append("In the Asm pane: , and . change kernel · t changes listing · c SASS diff vs previous\n")
        text.append("In the Rungs pane: Enter shows logs\n")
        text.append("ctrl+p opens the command palette\n", style="dim")
        with Vertical(id="dialog", classes="help"):
            yield Static(text)

    def action_close(self) -> None:
        self.dismiss(None)
