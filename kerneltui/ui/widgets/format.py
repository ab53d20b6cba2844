"""Cells and glyphs shared by the panes: colour carries meaning only (green pass, red fail, yellow running)."""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate
from typing import Any

from rich.syntax import Syntax
from rich.text import Span, Text

from harness.contract.results import RUNG_ORDER, Flag
from harness.contract.text import UNSAFE, cut, cut_said, printable, written_out
from harness.contract.units import duration_us, sig

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
    cell = shown(label, style=style, limit=12)
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
    """What the history said of the row (kerneltui.history.reads.may_be_best, the rule's one definition)."""
    return bool(row.get("may_be_best"))


def verdict_cell(row: dict[str, Any]) -> Text:
    verdict = row.get("verdict")
    if verdict == "approved":
        return Text("✓ approved", style="green")
    if verdict == "rejected":
        reason = row.get("verdict_reason") or ""
        return shown(f"✗ {reason[:13] or 'rejected'}", style="red")
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


# Text from versions, agents, workers and imports, on any screen. A line longer than LINE_CHARS is cut where it is
# shown, and a view longer than VIEW_LINES (a 50,000-line SASS listing fits), both said: a 1 MB docstring took
# 11 s to lay out each time it was shown. The history keeps the text whole.
LINE_CHARS = 2_000
VIEW_LINES = 100_000
BLOCK_CHARS = 20_000  # an error or a message folded to the pane's width is cut to this first
CUT_STYLE = "dim italic"


def shown(value: object, style: str = "", limit: int = LINE_CHARS) -> Text:
    """The one way untrusted text becomes something on screen: a Text (never markup), control and escape characters
    written out (harness.contract.text.printable), at most `limit` characters of it (the cut said). A Text keeps its
    styles."""
    if isinstance(value, Text):
        return _written_out(_cut_text(value, limit))
    raw = "" if value is None else str(value)
    text = Text(printable(raw[:limit]), style=style)
    if len(raw) > limit:
        text.append(cut_said(len(raw) - limit), style=CUT_STYLE)
    return text


def first_line(value: object, limit: int | None = None) -> str:
    """The first line of a text (a note, a description), at most `limit` characters: for a cell or a title."""
    return ("" if value is None else str(value)).strip().split("\n", 1)[0][:limit]


def shown_lines(lines: list[Text], most: int = VIEW_LINES) -> list[Text]:
    """shown() over each of the first `most` lines, and a last line saying how many more were cut."""
    kept = [shown(line) for line in lines[:most]]
    if len(lines) > most:
        kept.append(more_lines(len(lines) - most))
    return kept


def lines_of(text: str, most: int = VIEW_LINES) -> tuple[list[str], int]:
    """The first `most` lines of `text`, split at newlines alone (as a terminal draws them; str.splitlines also
    splits at form feeds and separators that a version can plant), a CRLF's CR dropped; and how many more there
    were. Splitting stops at `most`: no work for the rest of a huge text."""
    if not text:
        return [], 0
    parts = text.split("\n", most)
    if parts[-1] == "":
        parts.pop()
    more = 0
    if len(parts) > most:
        rest = parts.pop()
        more = rest.count("\n") + (0 if rest.endswith("\n") else 1)
    return [part[:-1] if part.endswith("\r") else part for part in parts], more


def cut_lines(text: str) -> list[str]:
    """lines_of() with each line cut to LINE_CHARS (said in it) and a last line saying how many more there were:
    for text matched line by line (a regular expression never sees a megabyte line)."""
    lines, more = lines_of(text)
    kept = [cut(line, LINE_CHARS) for line in lines]
    return [*kept, cut_said(more, "lines").strip()] if more else kept


def text_lines(text: str, style: str = "") -> list[Text]:
    """A block of untrusted text as shown lines, each cut, the view cut (both said)."""
    lines, more = lines_of(text)
    out = [shown(line, style) for line in lines]
    if more:
        out.append(more_lines(more))
    return out


def highlighted(code: str, background: str | None = "default") -> list[Text]:
    """Python source as highlighted lines, each cut before it is highlighted (the cut said after it)."""
    lines, more = lines_of(code)
    if not lines:
        return []
    kept = [printable(line[:LINE_CHARS]) for line in lines]
    joined = "\n".join(kept)
    text = Syntax(joined, "python", theme="monokai", background_color=background).highlight(joined)
    out = text.split("\n", allow_blank=True)[: len(kept)]
    out += [Text("") for _ in range(len(kept) - len(out))]
    for line, whole in zip(out, lines, strict=True):
        if len(whole) > LINE_CHARS:
            line.append(cut_said(len(whole) - LINE_CHARS), style=CUT_STYLE)
    if more:
        out.append(more_lines(more))
    return out


def more_lines(more: int) -> Text:
    """The last line of a view cut: how many lines were left out."""
    return Text(cut_said(more, "lines").strip(), style=CUT_STYLE)


def _cut_text(text: Text, limit: int) -> Text:
    if len(text) <= limit:
        return text
    kept = text[:limit]
    kept.append(cut_said(len(text) - limit), style=CUT_STYLE)
    return kept


def _written_out(text: Text) -> Text:
    """printable() over a Text, its styles moved to where their characters went."""
    plain = text.plain
    found = [match.start() for match in UNSAFE.finditer(plain)]
    if not found:
        return text
    growth = list(accumulate(len(written_out(plain[i])) - 1 for i in found))

    def moved(offset: int) -> int:
        before = bisect_left(found, offset)
        return offset + (growth[before - 1] if before else 0)

    out = text.blank_copy(printable(plain))
    out.spans = [Span(moved(span.start), moved(span.end), span.style) for span in text.spans]
    return out
