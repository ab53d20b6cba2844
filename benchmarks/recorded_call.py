"""What recording a call costs in a worker: one small version call plain, recorded (torch ops, provenance), and
recorded under torch's profiler too: a session each, as the bench case's recorded call is, or one shared by all of
them, as the correctness rung's calls are.

    python benchmarks/recorded_call.py [VERSION_FILE] [--reps 20]

Default: kernels/vecadd/v001.py on its problem's first correctness case. Prints the median milliseconds of each
way, of the profiler's start and stop alone, and the mean a call of REPS calls sharing one profiler session. On a GPU
the profiler collects CUDA activity (CUPTI). Only for our own example files: the version is imported here, not
contained.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from harness.problem.load import load_problem  # noqa: E402
from harness.worker.profiled import Profiled, SharedProfile  # noqa: E402
from harness.worker.recorder import Recorder  # noqa: E402


def median_ms(step: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        step()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("version", type=Path, nargs="?", default=REPO / "kernels" / "vecadd" / "v001.py")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    problem = load_problem(args.version.resolve().parent)
    spec = importlib.util.spec_from_file_location("recorded_version", args.version)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    inputs = problem.inputs_for(problem.cases[0], 7, torch.device("cuda" if cuda else "cpu"))
    recorder = Recorder()

    def recorded(profile: bool | Profiled) -> Callable[[], Any]:
        def step() -> None:
            with recorder.recording(inputs, profile, ()):
                out = module.custom_kernel(*inputs)
            recorder.report(out if isinstance(out, tuple) else (out,))

        return step

    def profiler_alone() -> None:
        profiled = Profiled(cuda)
        profiled.start()
        profiled.stop()

    module.custom_kernel(*inputs)  # compiles
    print(f"{torch.cuda.get_device_name() if cuda else 'CPU'}  {args.version}  {args.reps} reps, median ms")
    print(f"plain call          {median_ms(lambda: module.custom_kernel(*inputs), args.reps):8.2f}")
    print(f"recorded            {median_ms(recorded(False), args.reps):8.2f}")
    print(f"recorded, profiled  {median_ms(recorded(True), args.reps):8.2f}")
    print(f"profiler start+stop {median_ms(profiler_alone, args.reps):8.2f}")
    session = SharedProfile(cuda).for_call()  # the correctness rung's calls: one profiler session for all of them
    start = time.perf_counter()
    shared = recorded(session)
    for _ in range(args.reps):
        shared()
    session.stop()
    print(
        f"shared profiler     {1000 * (time.perf_counter() - start) / args.reps:8.2f}  (a call's share of one session)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
