"""Versions judged per minute with 1, 2 and 4 judges: does judging scale with the GPUs of a box?

    python benchmarks/judge_throughput.py [--judges 1,2,4] [--problem kernels/vecadd] [--problems 4]
                                          [--rungs load,compile,...] [--dir /tmp/kerneltui-throughput] [--json OUT]
                                          [--executor local|ray]

For each count k: a new workspace of `--problems` copies of the problem, the scheduler started headless through a
Session as the dashboard starts it, and, once its k judges are ready, every version of every copy written at once
(each a copy of one of the problem's own vNNN.py with a comment of its own, so each is a new version). Timed from the
write until the last version is judged: the watcher's debounce, the queue, the judges and the history, with each
judge's first version (its problem's reference timed, its device's ceilings measured) inside the time.

On a GPU box a judge runs per GPU: for k judges the run sees only the first k GPUs (CUDA_VISIBLE_DEVICES=0,…,k-1,
which is where the scheduler pins its judges); counts above the box's GPUs are left out. With no GPU, `[ladder]
judges = k` judges share the machine's cores. Each count runs in a process of its own: the scheduler counts the
GPUs it sees once per process. It prints one table: judges, versions, seconds, versions a minute, the speed-up over
one judge, and the efficiency (the speed-up over the judges used: 100% is perfect scaling). `--executor ray` runs
the judges as Ray actors on a local Ray cluster started in each child (one per visible GPU, or k on CPUs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.contract.options import Options, parse_rungs  # noqa: E402
from harness.workers.process import cuda_device_count  # noqa: E402
from kerneltui.core.config import Config, LadderConfig  # noqa: E402
from kerneltui.core.judging.events import SchedulerEvent  # noqa: E402
from kerneltui.core.session import Session  # noqa: E402
from kerneltui.core.workspace import Workspace  # noqa: E402

TIMEOUT_S = 3600.0


class Tally:
    """The scheduler's events, counted as they come from its thread."""

    def __init__(self) -> None:
        self.ready: set[int] = set()
        self.done = 0
        self.statuses: dict[str, int] = {}
        self.changed = threading.Condition()

    def heard(self, event: object) -> None:
        if not isinstance(event, SchedulerEvent):
            return
        with self.changed:
            if event.kind == "judge":
                self.ready.add(int(event.data.get("judge", -1)))
            elif event.kind in ("finished", "failed"):
                self.done += 1
                status = str(event.data.get("status", "error"))
                self.statuses[status] = self.statuses.get(status, 0) + 1
            elif event.kind == "warning":
                print(f"  warning: {event.data.get('message')}", file=sys.stderr, flush=True)
            self.changed.notify_all()

    def wait(self, until: Any, what: str) -> None:
        with self.changed:
            if not self.changed.wait_for(until, timeout=TIMEOUT_S):
                raise TimeoutError(f"no {what} within {TIMEOUT_S:.0f} s")


def make_workspace(root: Path, problem: Path, copies: int) -> list[tuple[Path, str]]:
    """The problem's copies (problem.py only) and the version files to write into them later."""
    if root.exists():
        shutil.rmtree(root)
    sources = sorted(problem.glob("v[0-9][0-9][0-9].py"))
    if not sources:
        raise SystemExit(f"{problem} has no vNNN.py to judge")
    planned = []
    for c in range(copies):
        folder = root / f"{problem.name}{c:02d}"
        folder.mkdir(parents=True)
        shutil.copy(problem / "problem.py", folder / "problem.py")
        for source in sources:
            text = f"{source.read_text()}\n# {folder.name}/{source.name}: a version of its own\n"
            planned.append((folder / source.name, text))
    return planned


def run_one(
    judges: int, problem: Path, copies: int, rungs: str | None, root: Path, executor: str = "local"
) -> dict[str, Any]:
    """One count of judges, in this process: its figures as a dict."""
    planned = make_workspace(root, problem, copies)
    options = Options(rungs=parse_rungs(rungs)) if rungs else Options()
    config = Config(ladder=LadderConfig(judges=judges, options=options, executor=[executor]))
    tally = Tally()
    session = Session(Workspace(root), config, tally.heard)
    started = time.perf_counter()
    session.start_scheduler(wait_s=60)
    scheduler = session.scheduler
    assert scheduler is not None
    try:
        count = len(scheduler.judges)
        tally.wait(lambda: len(tally.ready) >= count, "judges ready")
        ready_s = time.perf_counter() - started
        began = time.perf_counter()
        for path, text in planned:
            path.write_text(text)
        tally.wait(lambda: tally.done >= len(planned), "verdicts")
        seconds = time.perf_counter() - began
        devices = sorted({str(s.get("device")) for s in scheduler.judge_states()})
        judged = [s["judged"] for s in scheduler.judge_states()]
    finally:
        session.close()
    return {
        "judges": count,
        "versions": len(planned),
        "seconds": seconds,
        "ready_s": ready_s,
        "per_judge": judged,
        "devices": devices,
        "statuses": tally.statuses,
    }


def run_child(judges: int, gpus: int, args: argparse.Namespace) -> dict[str, Any]:
    """A count of judges in a process of its own; on a GPU box it sees the first `judges` GPUs only."""
    env = dict(os.environ)
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(judges))
    command = [sys.executable, __file__, "--one", str(judges), "--problem", str(args.problem)]
    command += ["--problems", str(args.problems), "--dir", str(args.dir / f"judges{judges}")]
    command += ["--rungs", args.rungs] if args.rungs else []
    command += ["--executor", args.executor]
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True, timeout=TIMEOUT_S + 120, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def table(results: list[dict[str, Any]]) -> str:
    lines = [f"{'judges':>6} {'versions':>8} {'seconds':>8} {'versions/min':>12} {'speed-up':>8} {'efficiency':>10}"]
    base = results[0]["versions"] / results[0]["seconds"] if results else 1.0
    for r in results:
        rate = r["versions"] / r["seconds"]
        speedup = rate / base
        lines.append(
            f"{r['judges']:>6} {r['versions']:>8} {r['seconds']:>8.1f} {rate * 60:>12.1f} "
            f"{speedup:>7.2f}× {100 * speedup / r['judges']:>9.0f}%"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judges", default="1,2,4", help="the counts of judges to time, comma-separated")
    parser.add_argument("--problem", type=Path, default=REPO / "kernels" / "vecadd", help="a problem folder")
    parser.add_argument("--problems", type=int, default=4, help="copies of the problem, each with all its versions")
    parser.add_argument("--rungs", help="only these rungs (default: the whole ladder)")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kerneltui-throughput"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--executor", default="local", choices=("local", "ray"), help="judges here or as Ray actors")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: this count, its figures as JSON
    args = parser.parse_args()
    args.problem = args.problem.resolve()
    if args.one:
        found = run_one(args.one, args.problem, args.problems, args.rungs, args.dir, args.executor)
        print(json.dumps(found), flush=True)
        return 0
    gpus = cuda_device_count()
    counts = [int(c) for c in args.judges.split(",")]
    if gpus and os.environ.get("CUDA_VISIBLE_DEVICES"):
        said = "CUDA_VISIBLE_DEVICES is replaced: k judges run on GPUs 0…k-1, as the scheduler pins them"
        print(said, file=sys.stderr)
    if gpus and max(counts) > gpus:
        print(f"{gpus} GPU(s): counts above it left out", file=sys.stderr)
        counts = [c for c in counts if c <= gpus]
    where = f"{gpus} GPU(s)" if gpus else "no GPU"
    print(f"{args.problems} copies of {args.problem.name} on {where}, judges {args.executor}", flush=True)
    results = []
    for count in counts:
        found = run_child(count, gpus, args)
        results.append(found)
        print(
            f"  {count} judge(s): {found['versions']} versions in {found['seconds']:.1f} s (judges ready after "
            f"{found['ready_s']:.1f} s; each judged {found['per_judge']}; {found['statuses']}; {found['devices']})",
            flush=True,
        )
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
