"""GPU timing: CUDA events around each call, an L2 flush and a rest before it, and a stop on a noise criterion.

The flush reads a buffer twice the L2's size rather than writing it: a write leaves the L2 full of dirty
lines whose write-back lands inside the next timed call (+5-10% on a 60 µs kernel against Nsight
Compute); a read evicts the previous call's dirty lines while it runs, outside the timed window, and leaves
only clean ones.

The same code times the kernel (in its worker) and the reference (in the judge). The CUDA primitives
are torch's C-level ones (the event type's methods, the device synchronize, the current stream, the
tensor fill), bound when this module is imported: unlike torch.cuda.Event's Python methods they cannot
be patched in place (a version setting `torch.cuda.Event.record.__code__` changes nothing here). The
worker imports this module and takes frozen() copies of its functions before it imports a version, so
patching this module afterwards does not change how it is timed either. Both events of a call are
recorded on the stream that was current before the call: a version switching streams inside the call
cannot move the end event onto an idle stream.
"""

from __future__ import annotations

import collections
import functools
import math
import statistics
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from harness.contract.messages import MAX_PLACEMENTS

_C = torch._C
_EventBase: Any = getattr(_C, "_CudaEventBase", None)
if _EventBase is not None and hasattr(_EventBase, "record"):  # a CUDA build of torch
    _new_event = functools.partial(_EventBase, enable_timing=True)
    _record = _EventBase.record  # method descriptors of a C type: immutable
    _elapsed = _EventBase.elapsed_time
    _synchronize = _C._cuda_synchronize
    _get_stream: Any = _C._cuda_getCurrentStream
    _get_device: Any = _C._cuda_getDevice
    _Stream: Any = _C._CudaStreamBase
    _spin: Any = _C._cuda_sleep  # a one-block kernel that spins for a number of clock cycles
else:  # no CUDA in this torch: nothing is timed, but the module imports
    _new_event = functools.partial(torch.cuda.Event, enable_timing=True)
    _record, _elapsed, _synchronize = torch.cuda.Event.record, torch.cuda.Event.elapsed_time, torch.cuda.synchronize
    _get_stream = _get_device = _Stream = _spin = None
_sum = _C.TensorBase.sum  # the flush: a read of the whole buffer (one float comes out)
_perf_counter = time.perf_counter


def caller_stream() -> Any:
    """The caller's current stream, from the C getter (torch.cuda.current_stream is patchable Python)."""
    if _get_stream is None:
        return torch.cuda.current_stream()
    stream_id, device_index, device_type = _get_stream(_get_device())
    return _Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)


@dataclass
class Timing:
    median_us: float
    p20_us: float
    p80_us: float
    min_us: float
    n: int
    noise_pct: float
    placements: int = 1  # places in device memory the calls' inputs rotated over (placed_copies)
    placement_pct: float = 0.0  # how far the figure could move with other places (over_placements)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def flush_buffer(device: torch.device | str = "cuda") -> torch.Tensor:
    """A buffer twice the L2's size (at least 256 MiB): reading it before a call leaves the L2 clean and cold."""
    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0) or 64 << 20)
    return torch.zeros(max(2 * l2, 256 << 20) // 4, dtype=torch.float32, device=device)


def evict_l2(buffer: torch.Tensor) -> None:
    """Evicts the L2 (dirty lines written back now, not in the next call): reads `buffer` (flush_buffer's)."""
    _sum(buffer)


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


# Cycles a GPU-side spin takes per µs: above any boost clock, so a spin lasts at least as long as asked.
SPIN_CYCLES_PER_US = 2600


def warm_up(fn: Callable[[], Any], seconds: float = 0.01, min_calls: int = 3) -> float:
    """Calls fn (its first call compiles, tunes and fills caches), then for `seconds` (at least min_calls) more:
    the time a call takes (ms) from those, host overhead included. Briefly: a long run of back-to-back calls is
    what pulls a tensor-core-bound kernel's clock down (see IDLE_RATIO)."""
    fn()
    _synchronize()
    start = _perf_counter()
    calls = 0
    while calls < min_calls or _perf_counter() - start < seconds:
        fn()
        calls += 1
    _synchronize()
    return (_perf_counter() - start) * 1000.0 / calls


# Before each timed call the device rests IDLE_RATIO times the call's time (at most MAX_IDLE_US), on a one-block
# spin that draws next to no power. Back to back, a tensor-core-bound kernel pulls the GPU to its power cap and
# its SM clock drops by how warm the GPU already was: an H200's bf16 4096³ matmul read 200-210 µs at ~1545 MHz
# (and 10% apart across evaluations), but 180 µs at ~1965 MHz, five runs within 0.4%, with this rest, where
# Nsight Compute (which times each kernel alone) reads 175-177 µs. Memory-bound kernels read the same either way.
IDLE_RATIO, MAX_IDLE_US = 10.0, 5000.0


def idle_us(per_call_ms: float) -> float:
    """How long the device rests before each timed call of one that takes per_call_ms."""
    return min(IDLE_RATIO * max(per_call_ms, 0.0) * 1000.0, MAX_IDLE_US)


def rest(flush: torch.Tensor, rest_us: float) -> None:
    """Lets the device idle `rest_us` (on a one-block spin), then evicts the L2 (evict_l2) right before the next
    call: nothing the version's process ran during the rest is left in the L2 for the call to find."""
    if rest_us > 0 and _spin is not None:
        _spin(int(SPIN_CYCLES_PER_US * rest_us))
    _sum(flush)


# A kernel's time can depend on where its inputs lie in device memory: on an H100 one softmax read 116-136 µs over
# six copies of the same inputs, each copy within 1% of itself round after round (benchmarks/placement.py): which
# L2 slices and DRAM channels the addresses map to. One placement per evaluation makes two evaluations 15% apart;
# calls rotating over several copies measure the mix, and the copies' spread says how far the mix can move. Over 8
# places five evaluations of that softmax still lay 6.5% apart, one of them saying ±2.1% (its 8 places happened
# to agree): 16 halve what one evaluation's draw of places can move the figure and steady the spread's estimate.
PLACEMENT_SHARE = 8  # the copies take at most this fraction (1/N) of the free device memory
MAX_PLACEMENT_BYTES = 2 << 30


def placed_copies(
    inputs: tuple[Any, ...], most: int = MAX_PLACEMENTS, room: int | None = None
) -> list[tuple[Any, ...]]:
    """`inputs`, then up to most-1 copies of them at other places in memory (the same values, shapes and strides;
    anything not a tensor shared), within `room` bytes (None: a share of the GPU's free memory). Only `inputs`
    where a copy could not be called the same way: a tensor that is a view, an alias of another, a subclass."""
    tensors = [v for v in inputs if isinstance(v, torch.Tensor)]
    if not tensors or not all(whole_tensor(t) for t in tensors):
        return [inputs]
    if len({t.untyped_storage().data_ptr() for t in tensors}) < len(tensors):
        return [inputs]
    if room is None:
        free, _ = torch.cuda.mem_get_info(tensors[0].device)
        room = min(free // PLACEMENT_SHARE, MAX_PLACEMENT_BYTES)
    copies = min(most - 1, room // max(1, sum(t.untyped_storage().nbytes() for t in tensors)))
    try:
        return [inputs] + [tuple(placed_copy(v) for v in inputs) for _ in range(copies)]
    except RuntimeError:  # out of memory after all, or strides empty_strided will not take: one place
        return [inputs]


def whole_tensor(t: torch.Tensor) -> bool:
    whole = t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.numel() * t.element_size()
    return type(t) is torch.Tensor and t.layout == torch.strided and not t.requires_grad and whole


def placed_copy(value: Any) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    return torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device=value.device).copy_(value)


def rotating(entry: Callable[..., Any], placements: list[tuple[Any, ...]], used: list[int]) -> Callable[[], Any]:
    """A call of `entry` on each of `placements` in turn; `used` gets the index of the one each call took."""
    count = len(placements)

    def call() -> Any:
        index = len(used) % count
        used.append(index)
        return entry(*placements[index])

    return call


# Student's t at 97.5% for 1 to 15 degrees of freedom: a 95% interval from the medians of 2 to 16 places
T_975 = (12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13)


def over_placements(samples: list[float], placement_of: list[int] | tuple[int, ...]) -> tuple[float, int, float]:
    """(the mean of each place's median, places, the 95% confidence interval's half-width of that mean over it):
    the figure of calls rotating over places in device memory, and how far it could lie from one over other
    places. A median of all the samples would jump between clusters (one evaluation's places mostly fast,
    another's mostly slow). With one place: (its median, 1, 0.0)."""
    by_place: dict[int, list[float]] = {}
    for sample, place in zip(samples, placement_of, strict=False):
        by_place.setdefault(place, []).append(sample)
    medians = [statistics.median(v) for v in by_place.values()]
    if len(medians) < 2:
        return statistics.median(samples), 1, 0.0
    figure = statistics.fmean(medians)
    halfwidth = T_975[min(len(medians), len(T_975) + 1) - 2] * statistics.stdev(medians) / math.sqrt(len(medians))
    return figure, len(medians), (halfwidth / figure if figure > 0 else math.inf)


def time_calls(
    fn: Callable[[], Any],
    flush: torch.Tensor,
    budget_s: float = 1.0,
    min_reps: int = 10,
    max_reps: int = 5000,
    noise_target: float = 0.005,
    watch: Any = None,
) -> list[float]:
    """Times fn once per sample (ms), after a rest (idle_us) and an L2 eviction; stops once the median is known to
    noise_target. `watch` (harness.worker.kernel_watch's): each call and each rest inside a block of its own."""
    call = fn if watch is None else watch.calling(fn)
    resting = idle_us(warm_up(call))
    samples: list[float] = []
    batch = 5
    start = _perf_counter()
    while len(samples) < max_reps:
        events = [(_new_event(), _new_event()) for _ in range(batch)]
        stream = caller_stream()
        for begin, end in events:
            if watch is None:
                rest(flush, resting)
            else:
                with watch.resting():
                    rest(flush, resting)
            _record(begin, stream)
            call()
            _record(end, stream)
        _synchronize()
        samples += [_elapsed(begin, end) for begin, end in events]
        enough = len(samples) >= min_reps
        if enough and (median_ci_halfwidth(samples) < noise_target or _perf_counter() - start > budget_s):
            break
        batch = min(max(batch * 2, 5), 100, max_reps - len(samples))
    return samples


def settled_calls(
    fn: Callable[[], Any], flush: torch.Tensor, reps: int = 30, budget_s: float = 0.5, min_reps: int = 3
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Times fn until the whole device is idle (ms), not just until the caller's stream is.

    A version can launch work on a stream of its own that the caller's stream never waits for: the
    events of time_calls then stop early. Here the end event is recorded after a device-wide
    synchronize, so that work counts, and so does the synchronize's wake-up latency: each call is
    paired with one of nothing, timed the same way, to subtract it. Ahead of the begin event a spin on the
    GPU and then the flush outlast fn's host launch path (1.5 times what the first call took, CuTeDSL's
    takes ~0.2 ms), so the time the host takes to launch is not counted as work. Each call also gives its
    tail: from an event on the caller's stream right after fn to the end, i.e. how long the device stayed busy
    once the caller's stream was done (plus that latency), the same for a version that waits on the device
    inside its call (a .item(), a copy from pageable memory), whose begin-to-end time holds host time too.
    Up to `reps` pairs, fewer (not under min_reps) past budget_s: a slow kernel's minimum needs few.
    Returns (fn's, nothing's) begin-to-end times, then (fn's, nothing's) tails.
    """
    launch_s = [0.0]

    def settle(call: Callable[[], Any], learn: bool = False) -> tuple[float, float]:
        begin, stream_end, end = _new_event(), _new_event(), _new_event()
        stream = caller_stream()
        _spin(int(SPIN_CYCLES_PER_US * (1.5e6 * launch_s[0] + 10)))
        _sum(flush)
        _record(begin, stream)
        called = _perf_counter()
        call()
        _record(stream_end, stream)
        if learn:  # once: a call that waits on the device inside would otherwise lengthen every later spin
            launch_s[0] = _perf_counter() - called
        _synchronize()
        _record(end, stream)
        _synchronize()
        return float(_elapsed(begin, end)), float(_elapsed(stream_end, end))

    _synchronize()
    settle(fn, learn=True)
    pairs: list[tuple[tuple[float, float], tuple[float, float]]] = []
    start = _perf_counter()
    while len(pairs) < reps and (len(pairs) < min_reps or _perf_counter() - start < budget_s):
        pairs.append((settle(fn), settle(do_nothing)))
    return (
        [work[0] for work, _ in pairs],
        [idle[0] for _, idle in pairs],
        [work[1] for work, _ in pairs],
        [idle[1] for _, idle in pairs],
    )


def synchronize() -> None:
    """The whole device idle (torch's C-level synchronize)."""
    _synchronize()


def do_nothing() -> None:
    return None


def drift(samples: list[float]) -> float:
    """How far the medians of the run's first, middle and last thirds sit apart, over the median (half the
    range): clocks that drop under sustained load move the timing during a run, which the median's confidence
    interval, taken over all samples as one population, does not see."""
    n = len(samples)
    if n < 9:
        return 0.0
    thirds = [statistics.median(samples[i * n // 3 : (i + 1) * n // 3]) for i in range(3)]
    med = statistics.median(samples)
    return (max(thirds) - min(thirds)) / 2 / med if med > 0 else 0.0


def summarize(samples_ms: list[float], placement_of: list[int] | tuple[int, ...] = ()) -> Timing:
    """Order statistics of the samples (in the order taken); the noise is the largest of the median's 95%
    confidence interval, the drift between the run's thirds and, where `placement_of` gives each sample's place
    in device memory (rotating), what other places could change. Over several places the figure (`median_us`)
    is the mean of each place's median (over_placements)."""
    us = sorted(s * 1000.0 for s in samples_ms)
    n = len(us)
    figure_ms, places, placed = over_placements(samples_ms, placement_of)

    def pct(p: float) -> float:
        return us[min(n - 1, max(0, round(p * (n - 1))))]

    return Timing(
        median_us=1000.0 * figure_ms,
        p20_us=pct(0.2),
        p80_us=pct(0.8),
        min_us=us[0],
        n=n,
        noise_pct=100.0 * max(median_ci_halfwidth(samples_ms), drift(samples_ms), placed) if n >= 5 else 100.0,
        placements=places,
        placement_pct=round(100.0 * placed, 2),
    )


def frozen() -> Any:
    """Private copies of this module's functions, bound to a snapshot of its globals.

    The kernel's worker takes them before it imports a version: a version that then patches
    harness.gpu.timing (its event functions, time_calls, the stop criterion) changes what a later
    `import harness.gpu.timing` sees, not how the worker times it.
    """
    snapshot = dict(globals())
    copies = {
        name: types.FunctionType(f.__code__, snapshot, name, f.__defaults__, f.__closure__)
        for name, f in snapshot.items()
        if isinstance(f, types.FunctionType) and f.__module__ == __name__ and name != "frozen"
    }
    snapshot.update(copies)  # the copies call each other, never the module's (patchable) names
    return collections.namedtuple("FrozenTiming", list(copies))(**copies)  # no attribute can be set on it
