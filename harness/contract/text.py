"""Text from a version (errors, notes, names, what it printed) made safe to show in a terminal."""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls (ESC starts terminal commands: titles, colours,
# cursor moves, OSC 52 clipboard writes), bidirectional marks, overrides and isolates that reorder what is
# shown, zero-width and line-separating format characters, and lone surrogates (a file name's undecodable
# bytes), which a terminal's UTF-8 encoder refuses.
UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff]"
)


def printable(text: str) -> str:
    """text with every control character written out (\\x1b), so none reaches a terminal raw."""
    return UNSAFE.sub(_escaped, text)


def written_out(char: str) -> str:
    """One unsafe character as printable() writes it."""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _escaped(match: re.Match[str]) -> str:
    return written_out(match.group())


def cut(text: str, limit: int) -> str:
    """text, at most `limit` characters of it, saying how many were left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + cut_said(len(text) - limit)


def cut_said(more: int, what: str = "characters") -> str:
    """What stands where text was cut."""
    return f" … cut: {more:,} more {what}"


def printable_tree(value: object) -> object:
    """printable() over every string in a JSON-like value (keys too)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, list):
        return [printable_tree(v) for v in value]
    if isinstance(value, dict):
        return {printable(str(k)): printable_tree(v) for k, v in value.items()}
    return value
