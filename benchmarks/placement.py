"""Does a version's time depend on where its inputs lie in device memory? One bench case's inputs copied to
several places, each copy timed in turn, round after round, the way the ladder times a version.

    python benchmarks/placement.py kernels/softmax/v001.py [--copies 6] [--rounds 3] [--budget 0.3]

Needs a GPU. Prints, per copy, its median in each round (µs) and CUPTI's device time: copies that keep their
own figure round after round while differing from each other are placement, not noise; all copies moving
together between rounds is the device (clocks, heat). Only for our own example files: the version is imported
here, not contained.
"""

from __future__ import annotations

import argparse
import importlib.util
import secrets
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from harness.gpu import timing  # noqa: E402
from harness.problem.load import case_label, load_problem  # noqa: E402
from harness.worker import profiled  # noqa: E402


def load_entry(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"placed_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.custom_kernel


def copies_of(inputs: tuple[Any, ...], count: int) -> list[tuple[Any, ...]]:
    """`count` copies of the inputs, a spacer between each so that no two sit in neighbouring blocks."""
    placed, spacers = [], []
    for _ in range(count):
        placed.append(tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in inputs))
        spacers.append(torch.empty(secrets.randbelow(64) + 3 << 20, dtype=torch.uint8, device="cuda"))
    return placed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("version", type=Path)
    parser.add_argument("--copies", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=0.3, help="seconds of timed calls per copy and round")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a GPU", file=sys.stderr)
        return 2
    problem = load_problem(args.version.resolve().parent)
    case = problem.bench_cases[0]
    entry = load_entry(args.version)
    inputs = problem.inputs_for(case, 1234, torch.device("cuda"))
    placed = copies_of(inputs, args.copies)
    flush = timing.flush_buffer("cuda")
    print(f"{torch.cuda.get_device_name()}  {args.version}  {case_label(case)}")
    table: list[list[float]] = [[] for _ in placed]
    for round_ in range(args.rounds):
        order = list(range(len(placed)))
        order = order[round_ % len(order) :] + order[: round_ % len(order)]  # each copy first once
        for index in order:
            values = placed[index]
            samples = timing.time_calls(lambda v=values: entry(*v), flush, budget_s=args.budget)
            table[index].append(timing.summarize(samples).median_us)
    for index, values in enumerate(placed):
        device = profiled.device_times(
            lambda v=values: entry(*v), lambda: timing.evict_l2(flush), timing.synchronize, 20
        )
        address = values[0].data_ptr() if isinstance(values[0], torch.Tensor) else 0
        rounds = "  ".join(f"{m:8.1f}" for m in table[index])
        print(f"copy {index}  @{address:#014x}  rounds {rounds}   device {1000 * statistics.median(device):8.1f} µs")
    medians = [statistics.median(row) for row in table]
    within = max((max(row) / min(row) - 1) for row in table)
    between = max(medians) / min(medians) - 1
    print(f"between copies {100 * between:.1f}%, within a copy across rounds {100 * within:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
