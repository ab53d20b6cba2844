"""A comment on lines of a version (its source, its diff, its PTX or SASS), sent to the problem's agent as guidance
that quotes what it is about: the version, where, and the lines themselves (`kerneltui comment`, the dashboard's
`c` on a selection)."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_QUOTED = 40  # lines quoted; a longer range is cut, and says so
MAX_LINE = 200


class CommentError(ValueError):
    """A range that is not one, or outside what it names."""


@dataclass(frozen=True)
class LineComment:
    version: str  # v003
    where: str  # v003.py, or "the diff against v002", "v003's SASS"
    first: int  # 1-based, inclusive
    last: int
    lines: tuple[str, ...]  # lines first..last as shown
    text: str

    def guidance(self) -> str:
        """What the agent reads: where, the lines numbered, then the comment."""
        span = f"line {self.first}" if self.first == self.last else f"lines {self.first}-{self.last}"
        shown = self.lines[:MAX_QUOTED]
        quoted = [f"  {self.first + i:>5}| {line[:MAX_LINE]}" for i, line in enumerate(shown)]
        if len(self.lines) > len(shown):
            quoted.append(f"  ... and {len(self.lines) - len(shown)} more lines")
        return "\n".join([f"On {self.version}, {self.where}, {span}:", *quoted, self.text.strip()])


def parse_range(text: str) -> tuple[int, int]:
    """ "12" or "12-18" (1-based) as (first, last)."""
    found = re.fullmatch(r"\s*(\d+)\s*(?:[-:]\s*(\d+))?\s*", text)
    if not found:
        raise CommentError(f"--lines {text!r}: a line (12) or a range (12-18)")
    first, last = int(found.group(1)), int(found.group(2) or found.group(1))
    if first < 1 or last < first:
        raise CommentError(f"--lines {text!r}: lines count from 1, the range's first before its last")
    return first, last


def comment_on(version: str, where: str, lines: list[str], first: int, last: int, text: str) -> LineComment:
    """A comment on lines first..last (1-based) of `lines`."""
    if not text.strip():
        raise CommentError("the comment is empty")
    if last > len(lines):
        raise CommentError(f"{where} has {len(lines)} lines: {first}-{last} is past its end")
    return LineComment(version, where, first, last, tuple(lines[first - 1 : last]), text)
