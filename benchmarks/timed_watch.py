"""What watching the timed calls costs and sees (harness.worker.kernel_watch), on a GPU.

    python benchmarks/timed_watch.py [--json OUT.json]

For a Triton add at a few sizes: the event median of the timed calls without the watch and with it (torch's
profiler with CUPTI on during the calls: the figure must not move), the seconds its report takes, and what it
reports for an honest call and for one whose thread launches a kernel between the calls.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.gpu import timing
from harness.worker import kernel_watch


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)


def add(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    n = a.numel()
    add_kernel[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024, num_warps=4)


def timed(call, flush: torch.Tensor, watch: bool) -> tuple[float, dict, float]:
    if not watch:
        return statistics.median(timing.time_calls(call, flush)) * 1000, {}, 0.0
    seen = kernel_watch.KernelWatch()
    seen.start()
    try:
        samples = timing.time_calls(call, flush, watch=seen)
    finally:
        started = time.perf_counter()
        report = seen.stop()
    return statistics.median(samples) * 1000, report, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a GPU: CUPTI records kernels on the device")
    flush = timing.flush_buffer("cuda")
    rows = []
    for n in (1 << 16, 1 << 20, 1 << 24):
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        out = torch.empty_like(a)
        call = functools.partial(add, a, b, out)
        plain = [timed(call, flush, False)[0] for _ in range(3)]
        watched = [timed(call, flush, True) for _ in range(3)]
        rows.append(
            {
                "n": n,
                "plain_us": plain,
                "watched_us": [w[0] for w in watched],
                "report_s": [round(w[2], 3) for w in watched],
                "report": watched[-1][1],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    rows.append({"thread_between_calls": between_calls(flush)})
    print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def between_calls(flush: torch.Tensor) -> dict:
    """A thread of the caller's launching a kernel whenever no call runs: the watch must say so."""
    a, b = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    out, work = torch.empty_like(a), torch.ones(1 << 22, device="cuda")
    in_call, stop = [False], threading.Event()

    def loader() -> None:
        stream = torch.cuda.Stream()
        while not stop.is_set():
            if not in_call[0]:
                with torch.cuda.stream(stream):
                    work.mul_(1.0000001)
            time.sleep(0.0005)

    def call() -> None:
        in_call[0] = True
        add(a, b, out)
        in_call[0] = False

    thread = threading.Thread(target=loader, daemon=True)
    thread.start()
    try:
        return timed(call, flush, True)[1]
    finally:
        stop.set()
        thread.join()


if __name__ == "__main__":
    main()
