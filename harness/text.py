"""Text from a version (errors, notes, names, what it printed) made safe to show in a terminal."""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls (ESC starts terminal commands: titles, colours,
# cursor moves, OSC 52 clipboard writes), and bidirectional overrides that reorder what is shown.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """text with every control character written out (\\x1b), so none reaches a terminal raw."""
    return _UNSAFE.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable_tree(value: object) -> object:
    """printable() over every string in a JSON-like value (keys too)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, list):
        return [printable_tree(v) for v in value]
    if isinstance(value, dict):
        return {printable(str(k)): printable_tree(v) for k, v in value.items()}
    return value
