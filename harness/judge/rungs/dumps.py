"""Dumps: every Triton, CuTeDSL and TileLang kernel's intermediate code, PTX, cubin and SASS, written where the
Asm pane reads them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.contract.results import RungResult
from harness.judge import artifacts as dumps_mod
from harness.judge.rungs.compile import caps_for, collect_kernels, prune_unlaunched
from harness.problem.rung import rung

if TYPE_CHECKING:
    from harness.judge.context import JudgeContext, VersionRun


@rung("dumps", after=("compile",))
def dumps(judge: JudgeContext, run: VersionRun) -> RungResult:
    caps = caps_for(judge.options)
    for worker in run.workers.values():
        collect_kernels(run, worker, caps, "later calls")
    prune_unlaunched(run)  # only what ran under test is dumped
    if not run.kernels:
        return RungResult(
            name="dumps", ok=True, metrics={"files": [], "note": "no Triton, CuTeDSL or TileLang kernels compiled"}
        )
    root = judge.options.state_dir or run.path.parent.parent / ".kerneltui"
    dest = root / "dumps" / run.problem.name / run.path.stem / run.ev.hash[:12]
    dumps_mod.specialise(run.kernels, [launch for found in run.observed.launches.values() for launch in found])
    try:
        files = dumps_mod.write_dumps(run.kernels, dest, caps.version_bytes, run.sass_ahead, lambda: judge.between(run))
    except OSError as exc:
        return RungResult(name="dumps", ok=False, err=f"cannot write dumps to {dest}: {exc.strerror or exc}")
    kinds = sorted({f["kind"] for f in files})
    kernels = [{**k.summary(), "kernel": k.label} for k in run.kernels]  # by the name the Asm pane lists
    metrics = {"dir": str(dest), "files": files, "kinds": kinds, "kernels": kernels}
    return RungResult(name="dumps", ok=True, metrics=metrics)
