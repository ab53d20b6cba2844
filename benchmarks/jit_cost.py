"""Where a version's first calls spend their time: Triton's JIT, case by case, and whether it compiles in parallel.

    python benchmarks/jit_cost.py [VERSION_FILE ...] [--threads 0,8] [--top 25] [--like-worker PARTS]

For each version (default: softmax v002 and rmsnorm v002) and each way of compiling, a fresh process with
an empty Triton cache, Triton's runtime made ready first (as a spare run worker is), then the version called
once on each correctness case, in order, as the correctness rung calls it. "--threads 0" compiles in the
calls; "N" first compiles every case's kernels with harness.gpu.precompile on N threads (on CPU copies of the
inputs, as the compile rung does), then makes the same calls: a call that still compiles shows as slow.
Prints per way: the seconds of the compile pass, of each case's call and their total; and, for the serial
way, cProfile's largest cumulative entries (the compiler's stages, ptxas, the launcher's C compile). With no
GPU it compiles ahead of time for sm_90 and makes no calls. Only for our own example files: a version is
imported here, not contained.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT = ["kernels/softmax/v002.py", "kernels/rmsnorm/v002.py"]


WORKER_PARTS = ("import", "profiler", "watch", "recorder")


def child(version: Path, threads: int, top: int, like_worker: tuple[str, ...] = ()) -> None:
    """Runs in a fresh process: one way of compiling one version; `like_worker`: which of what a run worker does
    before a version's first compile is done here too (WORKER_PARTS: importing harness.worker.main, warming
    torch's profiler, checking the timed calls' watch, installing the recorder), to find what slows it there."""
    sys.path.insert(0, str(REPO))
    import torch

    from harness.gpu import precompile
    from harness.problem.load import load_problem

    cuda = torch.cuda.is_available()
    if cuda:
        from harness.worker.triton_warm import warm_up

        warm_up()
    else:
        from harness.gpu import aot

        aot.install_triton(90)
    if like_worker:
        from harness.worker import main as worker

        if "profiler" in like_worker:
            print("  profiler:", worker.warm_profiler(cuda) or "warm")
        if "watch" in like_worker and cuda:
            print("  watch:", worker.watch_check() or "checked")
        if "recorder" in like_worker:
            worker.RECORDER.install()
    problem = load_problem(version.parent)
    spec = importlib.util.spec_from_file_location("jit_cost_version", version)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    device = torch.device("cuda" if cuda else "cpu")
    inputs = [problem.inputs_for(case, 1, device) for case in problem.cases]
    profiler = cProfile.Profile() if threads == 0 and top else None
    start = time.perf_counter()
    if threads:  # as the compile rung does it: on CPU copies of the inputs
        cpu_inputs = [problem.inputs_for(case, 1, torch.device("cpu")) for case in problem.cases]
        ahead = precompile.compile_ahead(module.custom_kernel, cpu_inputs, threads)
        print(f"  compiled ahead: {ahead.get('kernels')} kernels, {ahead.get('failed_calls')} calls failed")
    compiled = time.perf_counter()
    per_call = []
    if profiler:
        profiler.enable()
    for args in inputs:
        begun = time.perf_counter()
        module.custom_kernel(*args)
        if cuda:
            torch.cuda.synchronize()
        per_call.append(time.perf_counter() - begun)
    if profiler:
        profiler.disable()
    done = time.perf_counter()
    calls = " ".join(f"{s:.3f}" for s in per_call)
    print(
        f"{version.parent.name}/{version.stem} threads={threads}: compile pass {compiled - start:.3f} s, "
        f"calls {done - compiled:.3f} s [{calls}], total {done - start:.3f} s"
    )
    if profiler:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(top)
        print(text.getvalue().split("\n", 7)[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("versions", nargs="*", type=Path, default=[Path(p) for p in DEFAULT])
    parser.add_argument("--threads", default="0,8", help="ways to compile: 0 in the calls, N on N threads first")
    parser.add_argument("--top", type=int, default=25, help="cProfile entries shown for the serial way")
    parser.add_argument(
        "--like-worker",
        default="",
        help=f"comma-separated parts of a run worker's set-up done first ({','.join(WORKER_PARTS)}; 'all')",
    )
    parser.add_argument("--child", nargs=2, metavar=("VERSION", "THREADS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    parts = WORKER_PARTS if args.like_worker == "all" else tuple(p for p in args.like_worker.split(",") if p)
    if unknown := set(parts) - set(WORKER_PARTS):
        parser.error(f"--like-worker: unknown part(s) {', '.join(sorted(unknown))}")
    if args.child:
        child(Path(args.child[0]).resolve(), int(args.child[1]), args.top, parts)
        return 0
    for version in args.versions:
        for threads in args.threads.split(","):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, TRITON_CACHE_DIR=cache)
                command = [sys.executable, __file__, "--child", str(version), threads, "--top", str(args.top)]
                command += ["--like-worker", ",".join(parts)] if parts else []
                subprocess.run(command, env=env, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
