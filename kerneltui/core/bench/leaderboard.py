"""Agents measured on a suite, the way the field reports it: per problem each agent's best, and per agent fast_p.

fast_p (KernelBench's): the share of the suite's problems on which the agent wrote a correct version at least p
times as fast as the reference (fast_0: correct at all). Correct means passed the ladder and carries no trust flag,
unless the person approved it; a rejected version is not correct. Speed is the ladder's speedup over the
reference (its bench cases' geometric mean); with no GPU there are no timings, and fast_p above 0 is unknown
(None), never 0. A problem the agent could not start on counts as not solved.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from kerneltui.history.agents import seconds_between

DEFAULT_PS = (0.0, 1.0, 2.0)


@dataclass
class EntryFigures:
    """One agent on one problem."""

    problem: str
    agent: str
    folder: str
    versions: int = 0
    correct: bool = False
    flagged: int = 0  # passing versions held back by a trust flag
    best_version: str | None = None
    best_speedup: float | None = None
    best_roofline_pct: float | None = None
    timed: bool = False  # some version of it has GPU timings
    first_pass: str | None = None
    versions_to_pass: int | None = None
    minutes_to_pass: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    stop_reason: str | None = None
    error: str | None = None
    running: bool = False


@dataclass
class AgentSummary:
    agent: str
    problems: int
    fast: dict[str, float | None] = field(default_factory=dict)  # "fast_1": share of the suite's problems
    solved: int = 0
    mean_roofline_pct: float | None = None  # over the problems it solved with a roofline figure
    versions: int = 0
    mean_minutes_to_pass: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None


@dataclass
class Leaderboard:
    suite: str
    run_id: int
    ps: tuple[float, ...]
    entries: list[EntryFigures]
    agents: list[AgentSummary]
    started: str | None = None
    ended: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "run": self.run_id,
            "started": self.started,
            "ended": self.ended,
            "ps": list(self.ps),
            "agents": [asdict(a) for a in self.agents],
            "problems": [asdict(e) for e in self.entries],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)


def is_correct(row: dict[str, Any]) -> bool:
    if row.get("status") != "pass" or row.get("verdict") == "rejected":
        return False
    return not has_flags(row) or row.get("verdict") == "approved"


def has_flags(row: dict[str, Any]) -> bool:
    try:
        return bool(json.loads(row.get("flags") or "[]"))
    except ValueError:
        return True  # unreadable flags: not taken as clean


def entry_figures(entry: dict[str, Any], evaluations: list[dict[str, Any]]) -> EntryFigures:
    """`entry`: a bench_entries row with its session's figures; `evaluations`: its folder's versions, oldest first."""
    figures = EntryFigures(
        problem=entry["problem"],
        agent=entry["agent"],
        folder=entry["folder"],
        versions=len(evaluations),
        tokens_in=entry.get("input_tokens"),
        tokens_out=entry.get("output_tokens"),
        cost_usd=entry.get("cost_usd"),
        stop_reason=entry.get("stop_reason"),
        error=entry.get("error"),
        running=bool(entry.get("started")) and not entry.get("ended"),
    )
    correct = [row for row in evaluations if is_correct(row)]
    figures.flagged = sum(1 for row in evaluations if row.get("status") == "pass" and not is_correct(row))
    figures.timed = any(row.get("speedup") for row in evaluations)
    if not correct:
        return figures
    figures.correct = True
    first = correct[0]
    figures.first_pass = first["name"]
    figures.versions_to_pass = evaluations.index(first) + 1
    figures.minutes_to_pass = minutes_between(entry.get("session_started"), first.get("finished"))
    # the fastest; among equals (no timings) the newest, which is the one the agent kept working from
    best = max(reversed(correct), key=lambda row: (row.get("speedup") or 0.0, row.get("roofline_pct") or 0.0))
    figures.best_version = best["name"]
    figures.best_speedup = best.get("speedup")
    figures.best_roofline_pct = max((r["roofline_pct"] for r in correct if r.get("roofline_pct")), default=None)
    return figures


def minutes_between(start: str | None, end: str | None) -> float | None:
    seconds = seconds_between(start, end)
    return None if seconds is None else seconds / 60


def fast_p(entries: list[EntryFigures], p: float) -> float | None:
    """The share of entries correct and at least p× the reference; None for p > 0 when none was timed."""
    if not entries:
        return None
    if p > 0 and not any(e.timed for e in entries):
        return None
    hits = sum(1 for e in entries if e.correct and (p <= 0 or (e.best_speedup or 0.0) >= p))
    return hits / len(entries)


def p_key(p: float) -> str:
    return f"fast_{p:g}"


def summarise(agent: str, entries: list[EntryFigures], ps: tuple[float, ...]) -> AgentSummary:
    solved = [e for e in entries if e.correct]
    roofs = [e.best_roofline_pct for e in solved if e.best_roofline_pct is not None]
    minutes = [e.minutes_to_pass for e in solved if e.minutes_to_pass is not None]
    costs = [e.cost_usd for e in entries if e.cost_usd is not None]
    return AgentSummary(
        agent=agent,
        problems=len(entries),
        fast={p_key(p): fast_p(entries, p) for p in ps},
        solved=len(solved),
        mean_roofline_pct=sum(roofs) / len(roofs) if roofs else None,
        versions=sum(e.versions for e in entries),
        mean_minutes_to_pass=sum(minutes) / len(minutes) if minutes else None,
        tokens_in=sum(e.tokens_in or 0 for e in entries),
        tokens_out=sum(e.tokens_out or 0 for e in entries),
        cost_usd=sum(costs) if costs else None,
    )


def build(run: dict[str, Any], entries: list[EntryFigures], ps: tuple[float, ...] = DEFAULT_PS) -> Leaderboard:
    agents = list(dict.fromkeys(e.agent for e in entries))
    summaries = [summarise(a, [e for e in entries if e.agent == a], ps) for a in agents]
    summaries.sort(key=lambda s: tuple(-(v or 0.0) for v in reversed(list(s.fast.values()))))
    return Leaderboard(run["suite"], run["id"], ps, entries, summaries, run.get("started"), run.get("ended"))


AGENT_HEADS = ("agent", "solved", "roofline", "versions", "min to pass", "tokens in/out", "cost")  # fast_p after agent
PROBLEM_HEADS = (
    "problem", "agent", "correct", "best", "speedup", "roofline", "versions", "first pass", "tokens in/out", "cost",
    "ended",
)  # fmt: skip


def agent_rows(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    """Heads and rows of the agents' table (fast_p first), as text: the CLI and the dashboard draw the same."""
    fast = [p_key(p) for p in board.ps]
    rows = [
        [
            s.agent,
            *(share(s.fast[k]) for k in fast),
            f"{s.solved}/{s.problems}",
            pct(s.mean_roofline_pct),
            str(s.versions),
            number(s.mean_minutes_to_pass, "{:.1f}"),
            tokens(s.tokens_in, s.tokens_out),
            money(s.cost_usd),
        ]
        for s in board.agents
    ]
    return [AGENT_HEADS[0], *fast, *AGENT_HEADS[1:]], rows


def problem_rows(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    """Heads and rows of each problem's entries; "correct" reads yes, no or running."""
    rows = [
        [
            e.problem,
            e.agent,
            "running" if e.running else "yes" if e.correct else "no",
            e.best_version or "—",
            number(e.best_speedup, "{:.2f}×"),
            pct(e.best_roofline_pct),
            str(e.versions),
            f"{e.first_pass} ({number(e.minutes_to_pass, '{:.1f}')} min)" if e.first_pass else "—",
            tokens(e.tokens_in or 0, e.tokens_out or 0),
            money(e.cost_usd),
            e.error or e.stop_reason or "",
        ]
        for e in board.entries
    ]
    return list(PROBLEM_HEADS), rows


UNTIMED = "no GPU timings in this run: fast_p above 0 is unknown (—), not 0"


def table_text(board: Leaderboard) -> str:
    """The leaderboard as a terminal reads it: agents by fast_p, then each problem's entries."""
    heads, rows = problem_rows(board)
    cut = [[*row[:-1], row[-1][:60]] for row in rows]  # why it ended, cut to a line
    lines = [f"suite {board.suite} · run {board.run_id}", "", *aligned(*agent_rows(board)), "", *aligned(heads, cut)]
    if not any(e.timed for e in board.entries):
        lines += ["", UNTIMED]
    return "\n".join(lines)


def aligned(heads: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(c)) for c in column) for column in zip(heads, *rows, strict=False)]
    return ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() for row in [heads, *rows]]


def share(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}%"


def number(value: float | None, form: str) -> str:
    return "—" if value is None else form.format(value)


def money(value: float | None) -> str:
    return "—" if value is None else f"${value:.2f}"


def tokens(tokens_in: int, tokens_out: int) -> str:
    return f"{tokens_in:,}/{tokens_out:,}" if tokens_in or tokens_out else "—"
