"""Judges every example version under kernels/ with one judge and prints a table of what it found.

    python benchmarks/examples.py [VERSION_FILE ...] [--workspace kernels] [--json OUT.json] [--rungs load,...]
                                  [--repeat N]

Needs only the harness's own dependencies (torch, triton; nvidia-cutlass-dsl for CuTeDSL
versions), so it runs in a GPU box's Python as it is. On a GPU it prints timings, bandwidth and
% of roofline against the device's measured copy bandwidth and matmul rate (measured in the same
run when the workspace has none cached yet). "median" is timed by CUDA events on the caller's stream (launch
gaps included), "device" is the median of CUPTI's kernel durations per call (what Nsight Compute's
gpu__time_duration sums), "ncu" Nsight Compute's own figure where a would-be best was confirmed, "vs ncu"
how far the device time lies from it, "MHz" the SM clock under Nsight Compute and while the version was timed.
"min" is the fastest call timed on the caller's stream,
"settled" the fastest until the whole device was idle (a synchronize's latency taken off): far apart,
the version leaves work on a stream nobody waits for. With --repeat N each version is judged N times
(one after another) and a last table gives, per version, how far its N medians (event and device time)
spread, beside the largest noise figure any one evaluation reported.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def judge(
    paths: list[Path], rungs: str | None, state: Path, confirm: bool = True, sanitize: bool = True
) -> Iterator[dict]:
    """Yields each evaluation as the judge finishes it, so a run cut short still reports what it did."""
    request: dict = {"rungs": rungs.split(",")} if rungs else {}
    if not confirm:
        request["confirm"] = False
    if not sanitize:
        request["sanitize_best"] = False
    with subprocess.Popen(
        [sys.executable, "-m", "harness", "serve", "--state-dir", str(state)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    ) as judge_process:
        assert judge_process.stdin is not None and judge_process.stdout is not None
        judge_process.stdin.write("".join(json.dumps({"path": str(p), "id": str(p), **request}) + "\n" for p in paths))
        judge_process.stdin.close()
        for line in judge_process.stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            if event["event"] == "done":
                yield event["evaluation"]
            elif event["event"] == "error":
                print(f"error: {event}", file=sys.stderr)


def row(ev: dict) -> str:
    rungs = {r["name"]: r for r in ev["rungs"]}
    bench = rungs.get("benchmark", {}).get("metrics", {}) if rungs.get("benchmark", {}).get("ok") else {}
    roof = rungs.get("roofline", {}).get("metrics", {}) if rungs.get("roofline", {}).get("ok") is not None else {}
    compiled = rungs.get("compile", {}).get("metrics", {}).get("kernels", [])
    regs = max((k.get("registers", 0) for k in compiled), default=0)
    first = (bench.get("cases") or [{}])[0]
    roof_row = (roof.get("cases") or [{}])[0]
    failed = next((f"{r['name']}: {(r['err'] or '')[:60]}" for r in ev["rungs"] if r["ok"] is False), "")
    nsight = (bench.get("confirmed") or {}).get("nsight_us")
    return (
        f"{ev['problem']:<9} {ev['version']:<5} {ev['status']:<10} "
        f"{num(first.get('median_us'), '.1f', 10)} {num(first.get('min_us'), '.1f', 8)} "
        f"{num(first.get('device_median_us'), '.1f', 8)} {num(nsight, '.1f', 8)} "
        f"{num(apart_pct(first.get('device_median_us'), nsight), '+.1f', 7, '%')} {clocks(bench, first):>11} "
        f"{num(first.get('settled_us'), '.1f', 8)} {num(first.get('ref_median_us'), '.1f', 10)} "
        f"{num(bench.get('speedup'), '.2f', 7)} {num(roof_row.get('gbps'), '.0f', 8)} "
        f"{num(roof_row.get('tflops'), '.1f', 8)} {num(roof_row.get('pct'), '.0f', 6, '%')} "
        f"{regs:>5} {ev['seconds']:>6.1f}  {first.get('case', '')} {failed}"
        + "".join(f"  ⚑ {f['name']}: {f['reason'][:80]}" for f in ev.get("flags", []))
    )


def clocks(bench: dict, first: dict) -> str:
    """The SM clock (MHz) under Nsight Compute / while the first bench case was timed (NVML's median)."""
    ncu = (bench.get("confirmed") or {}).get("nsight_clock_mhz")
    ours = ((first.get("clocks") or {}).get("sm_mhz") or [None, None])[1]
    return f"{num(ncu, '.0f', 4).strip()}/{num(ours, '.0f', 4).strip()}"


def num(value: float | None, spec: str, width: int, unit: str = "") -> str:
    """A figure in its column, or a dash where there is none (no GPU, a rung that did not run)."""
    if value is None or value != value:
        return f"{'—':>{width + len(unit)}}"
    sign, spec = ("+", spec[1:]) if spec.startswith("+") else ("", spec)
    return f"{value:>{sign}{width}{spec}}{unit}"


def apart_pct(device_us: float | None, nsight_us: float | None) -> float:
    """CUPTI's device time against Nsight Compute's, in % (nan where either is missing)."""
    return 100 * (device_us / nsight_us - 1) if device_us and nsight_us else float("nan")


def print_spread(evaluations: list[dict]) -> None:
    """Per version: the spread of its evaluations' medians ((max - min) / min), and the noise each reported."""
    by_version: dict[tuple[str, str], list[dict]] = {}
    for ev in evaluations:
        bench = next((r for r in ev["rungs"] if r["name"] == "benchmark" and r["ok"]), None)
        if bench:
            by_version.setdefault((ev["problem"], ev["version"]), []).append(bench["metrics"]["cases"][0])
    print(f"{'problem':<9} {'ver':<5} {'n':>3} {'median spread':>14} {'device spread':>14} {'largest noise':>14}")
    for (problem, version), cases in by_version.items():
        medians = [c["median_us"] for c in cases]
        devices = [c["device_median_us"] for c in cases if c.get("device_median_us")]
        noise = max(c.get("noise_pct", float("nan")) for c in cases)
        print(
            f"{problem:<9} {version:<5} {len(cases):>3} {spread_pct(medians):>13.2f}% "
            f"{spread_pct(devices):>13.2f}% {noise:>13.2f}%"
        )


def spread_pct(values: list[float]) -> float:
    return 100 * (max(values) / min(values) - 1) if len(values) > 1 else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("versions", nargs="*", type=Path, help="default: every version in the workspace")
    parser.add_argument("--workspace", type=Path, default=REPO / "kernels")
    parser.add_argument("--json", type=Path, help="write every evaluation here")
    parser.add_argument("--rungs")
    parser.add_argument("--state-dir", type=Path, help="default: <workspace>/.kerneltui")
    parser.add_argument("--repeat", type=int, default=1, help="judge each version this many times")
    parser.add_argument("--no-confirm", action="store_true", help="no fresh worker or Nsight Compute (quicker)")
    parser.add_argument("--no-sanitize-best", action="store_true", help="no compute-sanitizer over would-be bests")
    args = parser.parse_args()
    paths = [p.resolve() for p in args.versions] or sorted(args.workspace.glob("*/v*.py"))
    paths = [p for p in paths for _ in range(args.repeat)]
    start = time.perf_counter()
    print(
        f"{'problem':<9} {'ver':<5} {'status':<10} {'median µs':>10} {'min µs':>8} {'device':>8} {'ncu':>8} "
        f"{'vs ncu':>8} {'MHz ncu/us':>11} {'settled':>8} {'ref µs':>10} "
        f"{'vs ref':>7} {'GB/s':>8} {'TFLOP/s':>8} {'roof':>7} {'regs':>5} {'eval s':>6}  case",
        flush=True,
    )
    evaluations = []
    state = args.state_dir or args.workspace / ".kerneltui"
    for evaluation in judge(paths, args.rungs, state, not args.no_confirm, not args.no_sanitize_best):
        evaluations.append(evaluation)
        print(row(evaluation), flush=True)
        if args.json:
            args.json.write_text(json.dumps(evaluations, indent=1, default=str))
    peaks = next(
        (
            r["metrics"]["peaks"]
            for ev in evaluations
            for r in ev["rungs"]
            if r["name"] == "roofline" and r["ok"] is not None
        ),
        None,
    )
    if peaks:
        print(
            f"device ceilings ({peaks.get('how', '')}): "
            + ", ".join(f"{k} {v:.0f}" for k, v in peaks.items() if k.endswith(("_gbps", "_tflops")))
        )
    if args.repeat > 1:
        print_spread(evaluations)
    device = evaluations[0]["device"] if evaluations else {}
    if evaluations:
        print(f"contained: {evaluations[0].get('sandbox')}")
    print(f"{len(evaluations)} of {len(paths)} versions on {device.get('name')} in {time.perf_counter() - start:.0f} s")
    return 0 if len(evaluations) == len(paths) and all(ev["ok"] for ev in evaluations) else 1


if __name__ == "__main__":
    sys.exit(main())
