"""What containment and the trust checks cost: a worker's start and a whole evaluation, level by level.

    python benchmarks/containment.py [VERSION_FILE] [--repeat 5] [--rungs load,compile,correctness]

Levels: `none` (--no-sandbox), `landlock` (bubblewrap turned off: Landlock, seccomp, no capabilities),
`bwrap` (bubblewrap as well, where it works here), and on a GPU `bwrap, no confirm` (the fresh-worker
re-judging of a would-be best left out). For each: the median of `repeat` worker starts (spawn to
ready, torch and triton imported) and of `repeat` evaluations of the version by one judge, which starts
its workers ahead of need as the dashboard does. Needs only the harness's dependencies.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def worker_starts(repeat: int, confine: bool, env: dict[str, str]) -> float:
    """Median seconds from spawning a worker to its ready message, in a child with this environment."""
    code = (
        "import json, sys, time\n"
        "from harness.workers.process import Spawn, WorkerProcess\n"
        "from harness.containment.watch import probe\n"
        f"spawn = Spawn(confine={confine})\n"
        "times = []\n"
        f"for _ in range({repeat}):\n"
        "    start = time.perf_counter(); w = WorkerProcess('run', spawn, interpret=True); w.wait_ready()\n"
        "    times.append(time.perf_counter() - start); w.close(); w.remove_scratch()\n"
        "print(json.dumps({'times': times, 'level': probe().level if spawn.confine else 'none'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return statistics.median(json.loads(done.stdout.strip().splitlines()[-1])["times"])


def evaluations(version: Path, repeat: int, rungs: str | None, extra: list[str], env: dict[str, str]) -> list[dict]:
    request = {"path": str(version), **({"rungs": rungs.split(",")} if rungs else {})}
    lines = "".join(json.dumps({**request, "id": i}) + "\n" for i in range(repeat))
    argv = [sys.executable, "-m", "harness", "serve", *extra]
    done = subprocess.run(argv, input=lines, capture_output=True, text=True, cwd=REPO, env=env)
    found = [json.loads(line)["evaluation"] for line in done.stdout.splitlines() if '"event": "done"' in line]
    if len(found) != repeat:
        raise SystemExit(f"the judge answered {len(found)} of {repeat}: {done.stderr[-2000:]}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("version", nargs="?", type=Path, default=REPO / "kernels" / "softmax" / "v002.py")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rungs", help="default: every rung")
    args = parser.parse_args()
    from harness.containment.watch import probe
    from harness.contract.report import containment_summary
    from harness.workers.process import cuda_device_count

    offer = probe()
    levels: list[tuple[str, list[str], dict[str, str], bool]] = [
        ("none", ["--no-sandbox"], {}, False),
        ("landlock", [], {"KERNELTUI_BWRAP": "none"}, True),
    ]
    if offer.bwrap:
        levels.append(("bwrap", [], {}, True))
        if cuda_device_count():
            levels.append(("bwrap, no confirm", ["--no-confirm"], {}, True))
    print(f"{args.version} · rungs {args.rungs or 'all'} · {args.repeat} of each · bwrap: {offer.bwrap_note}")
    print(f"{'level':<18} {'worker start s':>14} {'evaluation s':>13} {'status':<8} flags / containment")
    for name, extra, env_extra, confine in levels:
        env = dict(os.environ, **env_extra)
        start = worker_starts(args.repeat, confine, env)
        found = evaluations(args.version.resolve(), args.repeat, args.rungs, extra, env)
        seconds = statistics.median(ev["seconds"] for ev in found)
        flags = sorted({f["name"] for ev in found for f in ev.get("flags", [])})
        contained = containment_summary(found[0]["sandbox"])
        print(f"{name:<18} {start:>14.2f} {seconds:>13.2f} {found[0]['status']:<8} {flags or ''} {contained}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
