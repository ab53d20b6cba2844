"""The leaderboard of the workspace's newest bench (`kerneltui bench-agents`): agents by fast_p, then each
problem's entries; read in a thread, again every few seconds while an agent still works; Esc closes it."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kerneltui.core import leaderboard
from kerneltui.core.bench import read_board
from kerneltui.core.leaderboard import Leaderboard
from kerneltui.core.workspace import Workspace

REFRESH_S = 3.0


def board_tables(board: Leaderboard) -> list[Table | Text]:
    fast = [leaderboard.p_key(p) for p in board.ps]
    agents = Table(title=f"agents · suite {board.suite} · run {board.run_id}", title_justify="left", expand=True)
    for head in ("agent", *fast, "solved", "roofline", "versions", "min to pass", "tokens in/out", "cost"):
        agents.add_column(head, no_wrap=True)
    for s in board.agents:
        agents.add_row(
            s.agent,
            *(leaderboard.share(s.fast[k]) for k in fast),
            f"{s.solved}/{s.problems}",
            leaderboard.pct(s.mean_roofline_pct),
            str(s.versions),
            leaderboard.number(s.mean_minutes_to_pass, "{:.1f}"),
            leaderboard.tokens(s.tokens_in, s.tokens_out),
            leaderboard.money(s.cost_usd),
        )
    problems = Table(title="per problem: each agent's best", title_justify="left", expand=True)
    for head in ("problem", "agent", "correct", "best", "speedup", "roofline", "versions", "first pass", "cost", "why"):
        problems.add_column(head, no_wrap=head != "why")
    for e in board.entries:
        mark = Text("running", style="yellow") if e.running else Text("✓", "green") if e.correct else Text("✗", "red")
        problems.add_row(
            e.problem,
            e.agent,
            mark,
            e.best_version or "—",
            leaderboard.number(e.best_speedup, "{:.2f}×"),
            leaderboard.pct(e.best_roofline_pct),
            str(e.versions),
            f"{e.first_pass} ({leaderboard.number(e.minutes_to_pass, '{:.1f}')} min)" if e.first_pass else "—",
            leaderboard.money(e.cost_usd),
            e.error or e.stop_reason or "",
        )
    shown: list[Table | Text] = [agents, Text(""), problems]
    if not any(e.timed for e in board.entries):
        shown.append(Text("no GPU timings in this run: fast_p above 0 is unknown (—), not 0", style="dim"))
    return shown


class LeaderboardScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,L", "close", "close")]
    DEFAULT_CSS = """
    LeaderboardScreen { align: center middle; }
    LeaderboardScreen > VerticalScroll { width: 100%; height: 100%; background: $surface; padding: 0 1; }
    """

    def __init__(self, workspace: Workspace) -> None:
        super().__init__()
        self.workspace = workspace

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("reading the bench…", style="dim"), id="board")

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def load(self) -> None:
        board = read_board(self.workspace)
        self.app.call_from_thread(self.show, board)

    def show(self, board: Leaderboard | None) -> None:
        if not self.is_mounted:
            return
        target = self.query_one("#board", Static)
        if board is None:
            said = "no bench in this workspace: `kerneltui bench-agents SUITE --agent ... --into DIR` makes one"
            target.update(Text(said, style="dim"))
            return
        from rich.console import Group

        target.update(Group(*board_tables(board)))
        if any(e.running for e in board.entries):
            self.set_timer(REFRESH_S, self.load)

    def action_close(self) -> None:
        self.dismiss(None)
