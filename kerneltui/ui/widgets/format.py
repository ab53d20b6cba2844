"""Cells and glyphs shared by the panes: colour carries meaning only (green pass, red fail, yellow running)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from harness.report import duration_us, sig
from harness.results import RUNG_ORDER, Flag

STATUS = {
    "pass": ("✓ pass", "green"),
    "fail": ("✗ fail", "red"),
    "error": ("✗ error", "red"),
    "unverified": ("? unverified", "yellow"),
    "queued": ("○ queued", "dim"),
}


def next_rung(last: str | None) -> str:
    """The rung a running evaluation is on: the one after the last it reported."""
    if last is None:
        return RUNG_ORDER[0]
    # A name not among the built-in rungs is a problem's own rung: those run right after correctness.
    index = RUNG_ORDER.index(last if last in RUNG_ORDER else "correctness")
    return RUNG_ORDER[min(index + 1, len(RUNG_ORDER) - 1)]


def status_cell(row: dict[str, Any]) -> Text:
    status = row.get("status")
    if status == "running":
        return Text(f"◐ {next_rung(row.get('last_rung'))}", style="yellow")
    label, style = STATUS.get(str(status), (str(status or "·"), "dim"))
    cell = Text(label, style=style)
    if row_flags(row):
        cell.append(" ⚑", style="bold yellow")  # flagged: the Rungs pane says why
    if row.get("stale"):
        cell.append(" ↻", style="bold magenta")  # judged against an older problem.py
    return cell


def row_flags(row: dict[str, Any]) -> list[Flag]:
    """A version row's flags, as the type the agents' verdict (agents.verdict.Judged) holds them in."""
    from kerneltui.history.store import parse_flags

    return [Flag.from_json(f) for f in parse_flags(row.get("flags"))]


def may_be_best(row: dict[str, Any]) -> bool:
    """Passing, and unflagged or approved by the person (kerneltui.history.store.MAY_BE_BEST, for rows in hand)."""
    return row.get("status") == "pass" and (not row_flags(row) or row.get("verdict") == "approved")


def verdict_cell(row: dict[str, Any]) -> Text:
    verdict = row.get("verdict")
    if verdict == "approved":
        return Text("✓ approved", style="green")
    if verdict == "rejected":
        reason = row.get("verdict_reason") or ""
        return Text(f"✗ {reason[:13] or 'rejected'}", style="red")
    if verdict == "withdrawn":
        return Text("· withdrawn", style="dim")
    return Text("·", style="dim")


def number_cell(value: float | None, fmt: str, style: str = "") -> Text:
    return Text("·" if value is None else fmt.format(value), style=style if value is not None else "dim")


def error_cell(value: float | None, row: dict[str, Any] | None = None) -> Text:
    """The max abs error, red when it was outside the tolerance (correctness failed), green when inside."""
    if value is None:
        return Text(sig(value), style="dim")
    row = row or {}
    if row.get("failed_rung") == "correctness":
        return Text(sig(value), style="red")
    return Text(sig(value), style="green" if row.get("status") in ("pass", "unverified") else "")


def time_cell(value: float | None) -> Text:
    return Text(duration_us(value), style="" if value is not None else "dim")


def plain(value: Any) -> Text:
    """Any text from a kernel, an agent or a file: shown literally, never as markup."""
    return Text("" if value is None else str(value))
