"""Figures in the person's units: errors to two significant digits, durations in µs, ms or s."""

from __future__ import annotations

from typing import Any


def sig(value: Any, digits: int = 2) -> str:
    """1.2e-05 style for errors; '·' for missing."""
    if value is None:
        return "·"
    return f"{float(value):.{digits}g}" if abs(float(value)) >= 1e-3 or value == 0 else f"{float(value):.{digits - 1}e}"


# The figure that decides the best, the race and the roofline, by the name people and agents read it under
TIME_NAME = "event time"
TIME_MEANS = (
    "the event time (median_us): CUDA events on the caller's stream around each call, launch gaps included, after "
    "an L2 eviction and a rest; the median of the calls, or where they rotated over copies of the inputs at several "
    "places in device memory, the mean of each place's median. It decides the best, the race and the roofline; "
    "device_median_us (CUPTI: the kernels' own durations, as Nsight Compute sums them) is shown beside it"
)


def duration_us(us: float | None) -> str:
    if us is None:
        return "·"
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    if us >= 1e3:
        return f"{us / 1e3:.3g} ms"
    return f"{us:.3g} µs"
