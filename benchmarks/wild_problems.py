"""Public problems imported as they are and their solutions judged: does each verdict match what the solution is?

    python benchmarks/wild_problems.py [--gpumode DIR] [--kernelbench DIR ...] [--into W] [--no-confirm] [--json OUT]
                                       [--import-only]

With neither --gpumode nor --kernelbench, the versions already in --into are judged (imported on another machine
with --import-only: the import needs kerneltui, the judging only the harness).

--gpumode: a reference-kernels problem set (e.g. problems/pmpp_v2): every folder with a task.yml is imported with
`kerneltui import gpumode`, its solutions/correct and solutions/wrong becoming versions. --kernelbench: one or more
KernelBench level folders (e.g. KernelBench/level1 KernelBench/level2): each problem that
benchmarks/kernelbench_solutions holds solutions for (a folder named after the problem's file, with import.json's
--set values for small correctness cases) is imported with `kerneltui import kernelbench` and given those versions;
benchmarks/gpumode_solutions adds versions of our own to GPU MODE problems the same way. Every version says in its
docstring whether it is "a correct solution", "a wrong solution", or "a wrong solution its problem's inputs cannot
catch" (it passes the problem's own check); all are judged by one judge (the whole ladder: a wrong solution may only
show at the bench sizes) and a table says, per version, what it is, the verdict, where it failed, and whether the
two agree: a wrong solution must fail, one the inputs cannot catch must pass flagged `narrow-inputs`, a correct one
pass without that flag. Needs kerneltui installed (the import) and a GPU for the problems that make their inputs on
one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from examples import judge

SOLUTIONS = Path(__file__).resolve().parent / "kernelbench_solutions"
GPUMODE_SOLUTIONS = Path(__file__).resolve().parent / "gpumode_solutions"
NARROW = "narrow-inputs"


def kerneltui(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "kerneltui", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"kerneltui {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def import_gpumode(folder: Path, into: Path) -> None:
    for problem in sorted(p for p in folder.iterdir() if (p / "task.yml").is_file()):
        # the problems take utils.py from the folder above theirs: that folder is where files may come from
        said = kerneltui("import", "gpumode", str(problem), "--into", str(into), "--files-root", str(folder), "--force")
        made = Path(said.strip().splitlines()[-1].split(" imported into ")[-1].split(" (")[0])
        for version in sorted((GPUMODE_SOLUTIONS / problem.name).glob("v*.py")):
            shutil.copy(version, made / version.name)


def import_kernelbench(folders: list[Path], into: Path) -> None:
    for solutions in sorted(p for p in SOLUTIONS.iterdir() if p.is_dir()):
        source = next((f / f"{solutions.name}.py" for f in folders if (f / f"{solutions.name}.py").is_file()), None)
        if source is None:
            where = " or ".join(map(str, folders))
            print(f"skipped {solutions.name}: no {solutions.name}.py in {where}", file=sys.stderr)
            continue
        sets = json.loads((solutions / "import.json").read_text()).get("set", [])
        said = kerneltui(
            "import",
            "kernelbench",
            str(source),
            "--into",
            str(into),
            "--name",
            f"kb_{solutions.name}",
            "--force",
            *[arg for value in sets for arg in ("--set", value)],
        )
        made = Path(said.strip().splitlines()[-1].split(" -> ")[-1])  # the import names the folder it made
        for version in sorted(solutions.glob("v*.py")):
            shutil.copy(version, made / version.name)


def expected(path: Path) -> str:
    """ "pass", "fail" or "flag" (passes, flagged narrow-inputs), from the version's docstring; "?" where it says
    none of them."""
    head = " ".join(path.read_text()[:600].split())
    if "inputs cannot catch" in head:
        return "flag"
    return "pass" if "a correct solution" in head else "fail" if "a wrong solution" in head else "?"


def verdict(evaluation: dict[str, Any]) -> str:
    if not evaluation["ok"]:
        return "fail"
    return "flag" if any(f["name"] == NARROW for f in evaluation.get("flags", [])) else "pass"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpumode", type=Path, help="a reference-kernels problem set folder")
    parser.add_argument("--kernelbench", type=Path, nargs="+", help="KernelBench level folders")
    parser.add_argument("--into", type=Path, help="the workspace to import into (default: a new temporary one)")
    parser.add_argument("--no-confirm", action="store_true", help="no fresh worker or Nsight Compute (quicker)")
    parser.add_argument("--json", type=Path, help="write every evaluation here")
    parser.add_argument("--import-only", action="store_true", help="import into --into, judge nothing")
    args = parser.parse_args()
    if not args.gpumode and not args.kernelbench and not (args.into and args.into.is_dir()):
        parser.error("name --gpumode DIR, --kernelbench DIR, or an --into workspace imported already")
    into = (args.into or Path(tempfile.mkdtemp(prefix="wild-"))).resolve()
    start = time.perf_counter()
    if args.gpumode:
        import_gpumode(args.gpumode, into)
    if args.kernelbench:
        import_kernelbench(args.kernelbench, into)
    paths = sorted(into.glob("*/v*.py"))
    print(f"{len(paths)} versions imported into {into} in {time.perf_counter() - start:.0f} s", flush=True)
    if args.import_only:
        return 0
    print(f"{'problem':<32} {'ver':<5} {'is':<5} {'judged':<7} {'agree':<6} {'median µs':>10}  failed at / flags")
    evaluations, disagree = [], 0
    for ev in judge(paths, None, into / ".kerneltui", not args.no_confirm):
        evaluations.append(ev)
        path = Path(ev["path"])
        want, got = expected(path), verdict(ev)
        agree = "yes" if want == got else "NO" if want != "?" else "?"
        disagree += agree == "NO"
        bench: dict[str, Any] = next((r["metrics"] for r in ev["rungs"] if r["name"] == "benchmark" and r["ok"]), {})
        failed = next((f"{r['name']}: {(r['err'] or '')[:90]}" for r in ev["rungs"] if r["ok"] is False), "")
        flags = " ".join(f"⚑ {f['name']}" for f in ev.get("flags", []))
        median = f"{bench['median_us']:>10.1f}" if bench.get("median_us") else f"{'—':>10}"
        print(f"{ev['problem']:<32} {ev['version']:<5} {want:<5} {got:<7} {agree:<6} {median}  {failed} {flags}")
        if args.json:
            args.json.write_text(json.dumps(evaluations, indent=1, default=str))
    device = evaluations[0]["device"].get("name") if evaluations else None
    print(
        f"{len(evaluations)} of {len(paths)} judged on {device} in {time.perf_counter() - start:.0f} s; "
        f"{disagree} verdict(s) disagree with what the solution is"
    )
    return 0 if len(evaluations) == len(paths) else 1


if __name__ == "__main__":
    sys.exit(main())
