"""The leaderboard of the workspace's newest bench (`kerneltui bench-agents`): agents by fast_p, then each
problem's entries; read in a thread, again every few seconds while an agent still works; Esc closes it."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.binding import Binding

from kerneltui.core.bench import leaderboard
from kerneltui.core.bench.leaderboard import Leaderboard
from kerneltui.core.bench.suites import read_board
from kerneltui.core.workspace import Workspace
from kerneltui.ui.screens.panel import PanelScreen
from kerneltui.ui.widgets.format import shown

REFRESH_S = 3.0
CELL_CHARS = 300


def board_tables(board: Leaderboard) -> list[Table | Text]:
    """leaderboard's rows as tables; "correct" marked in colour."""
    heads, rows = leaderboard.agent_rows(board)
    title = shown(f"agents · suite {board.suite} · run {board.run_id}", limit=200)
    agents = Table(title=title, title_justify="left", expand=True)
    for head in heads:
        agents.add_column(shown(head), no_wrap=True)
    for row in rows:
        agents.add_row(*cells(row))
    heads, rows = leaderboard.problem_rows(board)
    problems = Table(title="per problem: each agent's best", title_justify="left", expand=True)
    for head in heads:
        problems.add_column(shown(head), no_wrap=head != "ended")
    marks = {"running": Text("running", style="yellow"), "yes": Text("✓", "green"), "no": Text("✗", "red")}
    correct = heads.index("correct")
    for row in rows:
        problems.add_row(*cells(row[:correct]), marks[row[correct]], *cells(row[correct + 1 :]))
    tables: list[Table | Text] = [agents, Text(""), problems]
    if not any(e.timed for e in board.entries):
        tables.append(Text(leaderboard.UNTIMED, style="dim"))
    return tables


def cells(row: list[str]) -> list[Text]:
    """A row's cells as text, never markup: agents' names and their stop reasons (an agent's stderr) are in them."""
    return [shown(cell, limit=CELL_CHARS) for cell in row]


class LeaderboardScreen(PanelScreen):
    BINDINGS = [Binding("escape,q,L", "close", "close")]
    PANEL_ID = "board"
    WAITING = "reading the bench…"

    def __init__(self, workspace: Workspace) -> None:
        super().__init__()
        self.workspace = workspace

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def load(self) -> None:
        board = read_board(self.workspace)
        self.app.call_from_thread(self.show, board)

    def show(self, board: Leaderboard | None) -> None:
        if board is None:
            said = "no bench in this workspace: `kerneltui bench-agents SUITE --agent ... --into DIR` makes one"
            self.draw(Text(said, style="dim"))
            return
        self.draw(Group(*board_tables(board)))
        if self.is_mounted and any(e.running for e in board.entries):
            self.set_timer(REFRESH_S, self.load)
