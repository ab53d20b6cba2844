"""How long from a new version file to its verdict, through one judge server as the dashboard runs it.

    python benchmarks/verdict_latency.py [PROBLEM ...] [--versions 10] [--base v002] [--json OUT.json]
                                         [--profile-judge FOLDER] [--burst SECONDS [--agents 2]]

For each problem under kernels/ (default softmax, rmsnorm, vecadd): a copy of the problem in a scratch
workspace, one `python -m harness serve` with its workers ready, the base version judged once (the device's
ceilings measured, the reference timed, and it becomes the best), then N new files, each the base with
another comment (a new version, the same kernel), each sent as the dashboard sends it (the best's median
and file to race). Every version is compiled afresh: each worker has a Triton cache of its own. It prints,
per problem, p50 and p95 of: the correctness verdict (request to the correctness rung's result) and the
whole ladder, the median seconds of each rung, and, per kind of request to a worker (from the judge's
KERNELTUI_TRACE), how many per version, their median seconds and their total a version (where a few slow calls,
a JIT compile, show), with the worker's own phases, and each worker's start (a fork from its template, or a
fresh process) to its "ready", and each template's (forked by the judge's fork server, or afresh). With --burst,
agents write versions on a clock instead (a version every SECONDS in all, the agents taking turns, whatever is
still being judged): the p50 and p95 then count from each write, queueing included.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


class Judge:
    """One judge server; requests written to it as they come (it judges them in order), its events read by a
    thread of their own and handed to whoever waits on the request's id."""

    def __init__(self, state: Path, trace: Path, profile: Path | None = None, args: tuple[str, ...] = ()) -> None:
        profiled = ["-m", "cProfile", "-o", str(profile)] if profile else []
        if profile:
            profile.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, *profiled, "-m", "harness", "serve", "--state-dir", str(state), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=dict(os.environ, KERNELTUI_TRACE=str(trace)),
        )
        # each event with when it came: a version's wait may begin long after its events were read (a burst)
        self.events: dict[Any, queue.Queue[tuple[float, dict[str, Any]]]] = {}
        self.lock = threading.Lock()
        self.device = self._next("ready")["device"]
        threading.Thread(target=self._read, daemon=True).start()

    def _next(self, *kinds: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                if event["event"] in kinds or event["event"] == "error":
                    return event
        raise RuntimeError(f"the judge exited (status {self.proc.wait()})")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                self._queue(event.get("id")).put((time.perf_counter(), event))
        for waiting in list(self.events.values()):
            waiting.put((time.perf_counter(), {"event": "error", "error": f"the judge exited ({self.proc.wait()})"}))

    def _queue(self, rid: Any) -> queue.Queue[tuple[float, dict[str, Any]]]:
        with self.lock:
            return self.events.setdefault(rid, queue.Queue())

    def submit(self, path: Path, best: dict[str, Any]) -> float:
        """Sends the request for `path` (its id: the file's stem); when it was sent."""
        assert self.proc.stdin is not None
        self._queue(path.stem)
        sent = time.perf_counter()
        with self.lock:
            self.proc.stdin.write(json.dumps({"path": str(path), "id": path.stem, **best}) + "\n")
            self.proc.stdin.flush()
        return sent

    def wait(self, path: Path, sent: float) -> dict[str, Any]:
        """Times from `sent` to when the judge's events came: each rung's result, and the verdict."""
        events = self._queue(path.stem)
        at: dict[str, float] = {}
        while True:
            came, event = events.get(timeout=1800)
            if event["event"] == "error":
                raise RuntimeError(event["error"])
            if event["event"] == "rung":
                at[event["rung"]["name"]] = came - sent
            elif event["event"] == "done":
                return {"rungs_at": at, "total_s": came - sent, "evaluation": event["evaluation"]}

    def judge(self, path: Path, best: dict[str, Any]) -> dict[str, Any]:
        return self.wait(path, self.submit(path, best))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def best_request(judged: dict[str, Any], path: Path, device: str) -> dict[str, Any]:
    """What the dashboard sends with a request once `path` is the best: its median, and its file to race."""
    bench = next((r for r in judged["evaluation"]["rungs"] if r["name"] == "benchmark" and r["ok"]), None)
    if bench is None:
        return {}
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return {
        "best_us": {device: bench["metrics"]["median_us"]},
        "race_with": {device: {"path": str(path), "hash": digest, "version": path.stem}},
    }


def measure(
    problem: str,
    base: str,
    count: int,
    root: Path,
    profile: Path | None = None,
    burst: tuple[float, int] | None = None,
    judge_args: tuple[str, ...] = (),
) -> dict[str, Any]:
    """`count` new versions judged one after another (each sent once the last is judged), or with `burst`
    (seconds, agents): a new version every that many seconds, the agents taking turns, whatever is still being
    judged, and each version's times count from when it was written."""
    folder = root / problem
    folder.mkdir(parents=True)
    shutil.copy(REPO / "kernels" / problem / "problem.py", folder / "problem.py")
    source = (REPO / "kernels" / problem / f"{base}.py").read_text()
    first = folder / "v001.py"
    first.write_text(source)
    trace = root / "trace.jsonl"
    judge = Judge(root / ".state", trace, profile, judge_args)
    try:
        warm = judge.judge(first, {})
        best = best_request(warm, first, str(judge.device.get("name")))
        seen = len(trace_lines(trace))
        runs = (
            burst_runs(judge, folder, source, count, best, burst)
            if burst
            else one_by_one(judge, folder, source, count, best, trace)
        )
        every = trace_lines(trace)
        requests = every[seen:]
        templates = [r for r in every if r["mode"] == "template"]  # the first one started with the judge
    finally:
        judge.close()
    if burst:
        for run in runs:
            run["requests"] = []
    return {
        **summarize(problem, warm, runs),
        "requests": requests_breakdown(requests, count),
        "starts": worker_starts(templates + [r for r in requests if r["mode"] != "template"]),
    }


def one_by_one(
    judge: Judge, folder: Path, source: str, count: int, best: dict[str, Any], trace: Path
) -> list[dict[str, Any]]:
    runs = []
    for i in range(count):
        path = folder / f"v{i + 2:03d}.py"
        path.write_text(f"{source}\n# variant {i + 2}: the same kernel in a new file\n")
        seen = trace_lines(trace)
        runs.append(judge.judge(path, best))
        runs[-1]["requests"] = trace_lines(trace)[len(seen) :]  # this version's, in the order made
    return runs


def burst_runs(
    judge: Judge, folder: Path, source: str, count: int, best: dict[str, Any], burst: tuple[float, int]
) -> list[dict[str, Any]]:
    """`count` new versions, one every `every_s` seconds in all, the agents taking turns (each writes every
    agents x every_s seconds), whatever is still being judged."""
    every_s, agents = burst
    sent: list[tuple[Path, float]] = []
    start = time.perf_counter()
    for i in range(count):
        agent = i % agents
        path = folder / f"{chr(ord('a') + agent)}{i + 2:03d}.py"
        path.write_text(f"{source}\n# agent {agent}, variant {i + 2}: the same kernel in a new file\n")
        sent.append((path, judge.submit(path, best)))
        time.sleep(max(0.0, start + (i + 1) * every_s - time.perf_counter()))
    return [judge.wait(path, at) for path, at in sent]


def worker_starts(requests: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per worker mode: seconds from its start (a fork, or a fresh process) to its "ready", p50 and p95."""
    by_mode: dict[str, list[float]] = {}
    for request in requests:
        if request.get("op") == "ready" and isinstance(request.get("start_s"), (int, float)):
            by_mode.setdefault(request["mode"], []).append(request["start_s"])
    return {mode: {"n": len(s), "p50": pct(s, 50), "p95": pct(s, 95), "max": max(s)} for mode, s in by_mode.items()}


def trace_lines(trace: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []


def slowest(requests: list[dict[str, Any]], n: int = 3) -> str:
    """A version's slowest requests (a worker's start waited on, a JIT compile, a confirmation under ncu)."""
    top = sorted(requests, key=lambda r: -r["s"])[:n]
    named = [f"{r['mode']}:{r['op']} {r['s']:.2f}" + (f" ({r['what']})" if r["op"] == "ready" else "") for r in top]
    return ", ".join(named)


def requests_breakdown(requests: list[dict[str, Any]], versions: int) -> dict[str, Any]:
    """Per kind of request to a worker (mode and op): how many per version, and the median seconds of each
    and of each phase the worker reported."""
    kinds: dict[str, list[dict[str, Any]]] = {}
    for request in requests:
        kinds.setdefault(f"{request['mode']}:{request['op']}", []).append(request)
    out: dict[str, Any] = {}
    for kind, found in kinds.items():
        phases: dict[str, list[float]] = {}
        for request in found:
            for name, seconds in (request.get("phases_s") or {}).items():
                phases.setdefault(name, []).append(seconds)
        out[kind] = {
            "per_version": len(found) / max(versions, 1),
            "median_s": statistics.median(r["s"] for r in found),
            "total_s_per_version": sum(r["s"] for r in found) / max(versions, 1),  # a few slow ones (JIT) show here
            "phases_median_s": {name: statistics.median(s) for name, s in phases.items()},
        }
    return out


def summarize(problem: str, warm: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    correct = [r["rungs_at"].get("correctness", float("nan")) for r in runs]
    total = [r["total_s"] for r in runs]
    per_rung: dict[str, list[float]] = {}
    for r in runs:
        for rung in r["evaluation"]["rungs"]:
            per_rung.setdefault(rung["name"], []).append(rung["seconds"] or 0.0)
    labels = [race_label(r["evaluation"]) for r in runs]
    each = [
        {
            "correctness_s": c,
            "ladder_s": t,
            "race": label,
            "confirmed": confirmed(r["evaluation"]),
            "slowest": slowest(r["requests"]),
        }
        for c, t, label, r in zip(correct, total, labels, runs, strict=True)
    ]
    return {
        "problem": problem,
        "first_s": warm["total_s"],
        "correctness_each_s": correct,
        "ladder_each_s": total,
        "correctness_p50": pct(correct, 50),
        "correctness_p95": pct(correct, 95),
        "ladder_p50": pct(total, 50),
        "ladder_p95": pct(total, 95),
        "rung_median_s": {name: statistics.median(s) for name, s in per_rung.items()},
        "statuses": sorted({r["evaluation"]["status"] for r in runs}),
        "race_labels": {label: labels.count(label) for label in set(labels)},
        "median_us": [bench_median(r["evaluation"]) for r in runs],
        "each": each,
    }


def confirmed(evaluation: dict[str, Any]) -> bool:
    """Whether the version was judged again in a fresh worker (a would-be best): a worker more taken."""
    bench: dict[str, Any] = next((r for r in evaluation["rungs"] if r["name"] == "benchmark"), {})
    return "confirmed" in (bench.get("metrics") or {})


def race_label(evaluation: dict[str, Any]) -> str:
    bench: dict[str, Any] = next((r for r in evaluation["rungs"] if r["name"] == "benchmark"), {})
    return str(((bench.get("metrics") or {}).get("race") or {}).get("label"))


def bench_median(evaluation: dict[str, Any]) -> float | None:
    bench = next((r for r in evaluation["rungs"] if r["name"] == "benchmark" and r["ok"]), None)
    return bench["metrics"]["median_us"] if bench else None


def pct(values: list[float], q: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problems", nargs="*", default=["softmax", "rmsnorm", "vecadd"])
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--base", default="v002")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--profile-judge", type=Path, help="a folder: the judge's cProfile stats, one file a problem")
    parser.add_argument(
        "--burst",
        type=float,
        metavar="SECONDS",
        help="a new version every SECONDS in all, the agents taking turns, judged or not (times count from the write)",
    )
    parser.add_argument("--agents", type=int, default=2, help="agents taking turns to write, with --burst")
    parser.add_argument(
        "--judge-arg",
        action="append",
        default=[],
        help="an option for the judge (repeatable), e.g. --judge-arg=--no-fork",
    )
    args = parser.parse_args()
    results = []
    head = f"{'problem':<9} {'first s':>8} {'correct p50':>12} {'p95':>6} {'ladder p50':>11} {'p95':>6}"
    print(f"{head}  rungs (median s)")
    for problem in args.problems:
        with tempfile.TemporaryDirectory(prefix="kerneltui-latency-") as root:
            stats = args.profile_judge / f"{problem}.prof" if args.profile_judge else None
            burst = (args.burst, args.agents) if args.burst else None
            found = measure(problem, args.base, args.versions, Path(root), stats, burst, tuple(args.judge_arg))
        results.append(found)
        rungs = " ".join(f"{k} {v:.2f}" for k, v in found["rung_median_s"].items())
        print(
            f"{problem:<9} {found['first_s']:>8.1f} {found['correctness_p50']:>12.2f} {found['correctness_p95']:>6.2f} "
            f"{found['ladder_p50']:>11.2f} {found['ladder_p95']:>6.2f}  {rungs}  races {found['race_labels']} "
            f"{','.join(found['statuses'])}",
            flush=True,
        )
        # each version's, in the order sent: an outlier shows where it came in the run
        print("    correctness s, each: " + " ".join(f"{s:.2f}" for s in found["correctness_each_s"]), flush=True)
        print("    ladder s, each:      " + " ".join(f"{s:.2f}" for s in found["ladder_each_s"]), flush=True)
        for i, one in enumerate(found["each"]):
            mark = " confirmed" if one["confirmed"] else ""
            print(
                f"    #{i + 1:<2} correct {one['correctness_s']:.2f} ladder {one['ladder_s']:.2f} race {one['race']}"
                f"{mark}; slowest: {one['slowest']}",
                flush=True,
            )
        for mode, start in found["starts"].items():
            what, many = ("template", "templates") if mode == "template" else (f"{mode} worker", "workers")
            print(
                f"    {what} start to ready: p50 {start['p50']:.3f} s  p95 {start['p95']:.3f} s  "
                f"max {start['max']:.3f} s  ({start['n']:.0f} {many})",
                flush=True,
            )
        for kind, figures in found["requests"].items():
            phases = " ".join(f"{k} {v:.3f}" for k, v in figures["phases_median_s"].items())
            print(
                f"    {kind:<16} x{figures['per_version']:<4.1f} {figures['median_s']:.3f} s each, "
                f"{figures['total_s_per_version']:.2f} s a version  {phases}",
                flush=True,
            )
        if args.json:  # after each problem: a run cut short keeps what it measured
            args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
