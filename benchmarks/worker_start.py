"""How long a kernel worker takes from its start to "ready", forked from a template or started afresh, and
what the workers and their template cost in memory.

    python benchmarks/worker_start.py [--workers 10] [--json OUT.json]

For each way (`fork`: forked from a template that imported torch and Triton once; `fresh`: a new Python
process, `--no-fork`), one pool as a judge holds it: the template (where there is one) started and ready
first, then N run workers taken one after another, each waited on until it says "ready" (on a GPU it has
initialised CUDA, warmed Triton and torch's profiler by then) and released. It prints p50, p95 and max of
start-to-ready (the worker's own clock at "ready" against the judge's at the start: both CLOCK_MONOTONIC),
and the proportional set size (PSS: shared pages split between the processes sharing them) of the
template and two ready workers, held as spares are.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.containment import watch as containment
from harness.workers.process import Spawn, WorkerPool, WorkerProcess


def pss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def start_s(worker: WorkerProcess) -> float:
    ready = worker.wait_ready()
    return ready.monotonic - worker.started


def measure(fork: bool, count: int) -> dict[str, Any]:
    pool = WorkerPool(Spawn(fork=fork), keep_spare=False)
    try:
        begun = time.monotonic()
        first = pool.take("run")
        first_s = start_s(first)  # a fork waits on its template's start here
        template_s = time.monotonic() - begun
        pool.release(first)
        starts = []
        for _ in range(count):
            worker = pool.take("run")
            starts.append(start_s(worker))
            pool.release(worker)
        spares = [pool.take("run") for _ in range(2)]
        for worker in spares:
            worker.wait_ready()
        table = containment.processes()
        template = pool.templates.running
        roots = [w.proc.pid for w in spares] + ([template.proc.pid] if template else [])
        tree = sorted({pid for root in roots for pid in containment.tree(root, table)})
        memory = pss_bytes(tree)
        for worker in spares:
            pool.release(worker)
    finally:
        pool.close()
    ordered = sorted(starts)
    return {
        "way": "fork" if fork else "fresh",
        "first_s": round(template_s if fork else first_s, 3),
        "p50_s": round(statistics.median(ordered), 3),
        "p95_s": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 3),
        "max_s": round(ordered[-1], 3),
        "each_s": [round(s, 3) for s in starts],
        "pss_mb_two_spares": round(memory / (1 << 20), 1),
        "processes": len(tree),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    print(f"{'way':<6} {'first s':>8} {'p50 s':>7} {'p95 s':>7} {'max s':>7} {'PSS MB (2 spares)':>18}")
    for fork in (True, False):
        found = measure(fork, args.workers)
        results.append(found)
        print(
            f"{found['way']:<6} {found['first_s']:>8.2f} {found['p50_s']:>7.3f} {found['p95_s']:>7.3f} "
            f"{found['max_s']:>7.3f} {found['pss_mb_two_spares']:>18.0f}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
