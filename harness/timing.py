"""GPU timing: CUDA events around each call, an L2 flush before it, and a stop on a noise criterion.

The same code times the kernel (in its worker) and the reference (in the judge). CUDA primitives are
bound when this module is imported, and the worker imports it and takes frozen() copies of its
functions before it imports a version, so a version that patches torch.cuda.Event,
torch.cuda.synchronize or this module afterwards does not change how it is timed.
"""

from __future__ import annotations

import collections
import math
import statistics
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

_Event = torch.cuda.Event
_record = torch.cuda.Event.record
_elapsed = torch.cuda.Event.elapsed_time
_synchronize = torch.cuda.synchronize


@dataclass
class Timing:
    median_us: float
    p20_us: float
    p80_us: float
    min_us: float
    n: int
    noise_pct: float

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def flush_buffer(device: torch.device | str = "cuda") -> torch.Tensor:
    """A buffer twice the L2's size (at least 256 MiB): writing it before a call empties the L2."""
    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0) or 64 << 20)
    return torch.empty(max(2 * l2, 256 << 20), dtype=torch.int8, device=device)


def median_ci_halfwidth(samples: list[float]) -> float:
    """Half the width of the 95% confidence interval of the median, over the median (order statistics)."""
    n = len(samples)
    if n < 5:
        return math.inf
    ordered = sorted(samples)
    spread = 1.96 * math.sqrt(n) / 2
    lo = ordered[max(0, int(n / 2 - spread))]
    hi = ordered[min(n - 1, math.ceil(n / 2 + spread))]
    med = statistics.median(ordered)
    return (hi - lo) / 2 / med if med > 0 else math.inf


def warm_up(fn: Callable[[], Any], seconds: float = 0.05, min_calls: int = 2) -> None:
    start = time.perf_counter()
    calls = 0
    while calls < min_calls or time.perf_counter() - start < seconds:
        fn()
        calls += 1
    _synchronize()


def time_calls(
    fn: Callable[[], Any],
    flush: torch.Tensor,
    budget_s: float = 1.0,
    min_reps: int = 10,
    max_reps: int = 5000,
    noise_target: float = 0.005,
) -> list[float]:
    """Times fn once per sample (ms), flushing the L2 first; stops once the median is known to noise_target."""
    warm_up(fn)
    samples: list[float] = []
    batch = 5
    start = time.perf_counter()
    while len(samples) < max_reps:
        events = [(_Event(enable_timing=True), _Event(enable_timing=True)) for _ in range(batch)]
        for begin, end in events:
            flush.zero_()
            _record(begin)
            fn()
            _record(end)
        _synchronize()
        samples += [_elapsed(begin, end) for begin, end in events]
        enough = len(samples) >= min_reps
        if enough and (median_ci_halfwidth(samples) < noise_target or time.perf_counter() - start > budget_s):
            break
        batch = min(max(batch * 2, 5), 100, max_reps - len(samples))
    return samples


def settled_calls(
    fn: Callable[[], Any], flush: torch.Tensor, reps: int = 30, budget_s: float = 0.5, min_reps: int = 3
) -> tuple[list[float], list[float]]:
    """Times fn until the whole device is idle (ms), not just until the caller's stream is.

    A version can launch work on a stream of its own that the caller's stream never waits for: the
    events of time_calls then stop early. Here the end event is recorded after a device-wide
    synchronize, so that work counts, and so does the synchronize's wake-up latency: each call is
    paired with one of nothing, timed the same way, to subtract it. The flush ahead of the begin event
    keeps the GPU busy while the host launches fn, as in time_calls. Up to `reps` pairs, fewer (not under
    min_reps) past budget_s: a slow kernel's minimum needs few. Returns (fn's, nothing's).
    """

    def settle(call: Callable[[], Any]) -> float:
        begin, end = _Event(enable_timing=True), _Event(enable_timing=True)
        flush.zero_()
        _record(begin)
        call()
        _synchronize()
        _record(end)
        _synchronize()
        return float(_elapsed(begin, end))

    _synchronize()
    pairs: list[tuple[float, float]] = []
    start = time.perf_counter()
    while len(pairs) < reps and (len(pairs) < min_reps or time.perf_counter() - start < budget_s):
        pairs.append((settle(fn), settle(do_nothing)))
    return [work for work, _ in pairs], [idle for _, idle in pairs]


def do_nothing() -> None:
    return None


def summarize(samples_ms: list[float]) -> Timing:
    us = sorted(s * 1000.0 for s in samples_ms)
    n = len(us)

    def pct(p: float) -> float:
        return us[min(n - 1, max(0, round(p * (n - 1))))]

    return Timing(
        median_us=statistics.median(us),
        p20_us=pct(0.2),
        p80_us=pct(0.8),
        min_us=us[0],
        n=n,
        noise_pct=100.0 * median_ci_halfwidth(samples_ms) if n >= 5 else 100.0,
    )


def frozen() -> Any:
    """Private copies of this module's functions, bound to a snapshot of its globals.

    The kernel's worker takes them before it imports a version: a version that then patches
    harness.timing (its event functions, time_calls, the stop criterion) changes what a later
    `import harness.timing` sees, not how the worker times it.
    """
    snapshot = dict(globals())
    copies = {
        name: types.FunctionType(f.__code__, snapshot, name, f.__defaults__, f.__closure__)
        for name, f in snapshot.items()
        if isinstance(f, types.FunctionType) and f.__module__ == __name__ and name != "frozen"
    }
    snapshot.update(copies)  # the copies call each other, never the module's (patchable) names
    return collections.namedtuple("FrozenTiming", list(copies))(**copies)  # no attribute can be set on it
