"""The matmul examples against torch.matmul (cuBLAS) in bf16, timed the way the ladder times versions.

    python benchmarks/matmul_vs_torch.py [VERSION_FILE ...] [--sizes 4096,8192] [--budget 1.0]

Needs a GPU. Each version's `custom_kernel` and torch.matmul are timed in this process, one after
the other on the same inputs, with the harness's own protocol (an L2 eviction before each call,
CUDA events on the caller's stream) and CUPTI's kernel durations beside it (what Nsight Compute's
gpu__time_duration reports), each twice in the order A B ... B A. Prints per size: median and device µs
(the mean of the two rounds), TFLOP/s, and % of torch. Default: every matmul version but v001. Only
for our own example files: a version is imported here, not contained.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from harness.gpu import timing  # noqa: E402
from harness.worker import profiled  # noqa: E402


def load_entry(path: Path) -> Callable[..., Any]:
    spec = importlib.util.spec_from_file_location(f"matmul_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.custom_kernel


def measure(call: Callable[[], Any], flush: torch.Tensor, budget_s: float) -> tuple[float, float]:
    """(median µs by CUDA events, median µs of CUPTI device time)."""
    median = timing.summarize(timing.time_calls(call, flush, budget_s=budget_s)).median_us
    device = profiled.device_times(call, lambda: timing.evict_l2(flush), timing.synchronize, 20)
    return median, 1000.0 * sorted(device)[len(device) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("versions", nargs="*", type=Path)
    parser.add_argument("--sizes", default="4096,8192", help="square sizes M=N=K")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of timed calls per figure")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a GPU", file=sys.stderr)
        return 2
    paths = args.versions or sorted((REPO / "kernels" / "matmul").glob("v*.py"))[1:]  # v001 is far behind
    entries = {"torch": torch.matmul, **{p.stem: load_entry(p) for p in paths}}
    flush = timing.flush_buffer("cuda")
    print(f"{torch.cuda.get_device_name()}  bf16 in, fp32 accumulate, bf16 out")
    print(
        f"{'size':>6} {'who':<7} {'median µs':>10} {'device µs':>10} {'TFLOP/s':>8} {'% torch':>8} {'max |Δ|':>8}"
        "   device µs per round"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(size)
        a = torch.randn(size, size, device="cuda", generator=gen).mul_(size**-0.25).bfloat16()
        b = torch.randn(size, size, device="cuda", generator=gen).mul_(size**-0.25).bfloat16()
        expected = torch.matmul(a, b).float()
        errors = {who: (entry(a, b).float() - expected).abs().max().item() for who, entry in entries.items()}
        # Each timed twice, in the order A B C ... C B A: a drift of clocks or temperature weighs on all alike.
        figures: dict[str, list[tuple[float, float]]] = {who: [] for who in entries}
        for who in [*entries, *reversed(entries)]:
            figures[who].append(measure(functools.partial(entries[who], a, b), flush, args.budget))
        torch_device_us = statistics.mean(d for _, d in figures["torch"])
        for who, pair in figures.items():
            median_us, device_us = statistics.mean(m for m, _ in pair), statistics.mean(d for _, d in pair)
            rounds = " / ".join(f"{d:.1f}" for _, d in pair)
            print(
                f"{size:>6} {who:<7} {median_us:>10.1f} {device_us:>10.1f} {2 * size**3 / device_us / 1e6:>8.0f} "
                f"{100 * torch_device_us / device_us:>7.1f}% {errors[who]:>8.3f}   {rounds}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
