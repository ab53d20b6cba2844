"""Figures in the person's units: errors to two significant digits, durations in µs, ms or s."""

from __future__ import annotations

from typing import Any


def sig(value: Any, digits: int = 2) -> str:
    """1.2e-05 style for errors; '·' for missing."""
    if value is None:
        return "·"
    return f"{float(value):.{digits}g}" if abs(float(value)) >= 1e-3 or value == 0 else f"{float(value):.{digits - 1}e}"


def duration_us(us: float | None) -> str:
    if us is None:
        return "·"
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    if us >= 1e3:
        return f"{us / 1e3:.3g} ms"
    return f"{us:.3g} µs"
