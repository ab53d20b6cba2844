"""Small modal screens: a reason for a rejection, confirming quit while jobs run, and help."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from kerneltui.ui.widgets.format import shown


class RejectScreen(ModalScreen[str | None]):
    """Asks why; Enter confirms (the reason may be empty), Esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, version: str) -> None:
        super().__init__()
        self.version = version

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(shown(f"Reject {self.version}: why? (Enter confirms, Esc cancels)", limit=300))
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
            yield Static(shown(self.question, limit=1_000))

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


GLYPHS = (
    ("✓ ✗", "passed · failed (the failed rung beside it)"),
    ("◐ rung", "being judged, on that rung"),
    ("○", "queued"),
    ("?", "unverified: passed what this box could check (no GPU: CuTeDSL is not run)"),
    ("⚑", "flagged: check the Rungs pane before trusting it; not the best until approved"),
    ("↻", "judged against an older problem.py: B judges it again"),
    ("★", "the best passing version (of this GPU); in problems, its % of roofline"),
    ("▲ ▼ = ?", "raced against the best back to back: faster, slower, the same, ambiguous"),
    ("+N", "in problems: N versions queued or being judged"),
    ("⚠", "in problems: problem.py has an error"),
    ("✓ approved ✗ reason", "the person's verdict (u withdraws the newest)"),
)


class HelpScreen(ModalScreen[None]):
    """Every key (as typed, with the binding id to remap it by), then what each glyph means; scrolls."""

    BINDINGS = [
        Binding("escape,q,question_mark", "close", "close"),
        Binding("j,down", "scroll(1)", show=False),
        Binding("k,up", "scroll(-1)", show=False),
    ]

    def __init__(self, rows: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        text = Text("Keys (remap them in the config file's [keys] by the id beside each)\n\n", style="bold")
        key_width = max((len(k) for k, _, _ in self.rows), default=10) + 2
        id_width = max((len(i) for _, _, i in self.rows), default=10) + 2
        for keys, description, binding_id in self.rows:  # the description last: on a narrow screen it wraps
            text.append(f"  {keys:<{key_width}}", style="bold yellow")
            text.append(f"{binding_id:<{id_width}}", style="dim")
            text.append(f"{description}\n")
        text.append("\nIn text panes: / search · n / N next and previous match · j / k scroll\n")
        text.append("In the Asm pane: , and . change kernel · t changes listing · c SASS diff vs previous\n")
        text.append("In the Rungs pane: Enter shows logs\n")
        text.append("ctrl+p opens the command palette\n\n", style="dim")
        text.append("What the marks mean\n\n", style="bold")
        mark_width = max(len(mark) for mark, _ in GLYPHS) + 2
        for mark, meaning in GLYPHS:
            text.append(f"  {mark:<{mark_width}}", style="bold")
            text.append(f"{meaning}\n")
        with VerticalScroll(id="dialog", classes="help"):
            yield Static(text)

    def action_scroll(self, lines: int) -> None:
        self.query_one(VerticalScroll).scroll_relative(y=lines, animate=False)

    def action_close(self) -> None:
        self.dismiss(None)
