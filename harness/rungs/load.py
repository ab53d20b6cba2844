"""Load: the version imported in its worker, `custom_kernel` (or KernelBench's `ModelNew`) found; what its
source says of itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness import source
from harness.results import RungResult
from harness.rungs import rung

if TYPE_CHECKING:
    from harness.ladder import Ladder, VersionRun


@rung("load")
def load(ladder: Ladder, run: VersionRun) -> RungResult:
    metrics: dict[str, Any] = {
        "entry": "custom_kernel",
        "dsls": run.dsls or ["torch"],
        "notes": source.notes(run.text),
        "warnings": source.static_checks(run.text),
    }
    worker = ladder.worker(run, "run")
    reply = ladder.load_into(worker, run)
    run.ev.sandbox = worker.containment
    metrics["sandbox"] = run.ev.sandbox
    if ladder.cuda and not (worker.ready or {}).get("cuda"):
        err = (
            f"the GPU cannot be used inside the worker's sandbox ({run.ev.sandbox}): "
            "`kerneltui doctor` says what this box offers; --no-sandbox runs workers unconfined"
        )
        return RungResult(name="load", ok=False, err=err, metrics=metrics)
    if not reply.get("ok"):
        return RungResult(name="load", ok=False, err=reply.get("err"), metrics=metrics, log=reply.get("trace"))
    if reply.get("entry") == "ModelNew":  # a KernelBench version (harness.kernelbench)
        metrics["entry"] = "ModelNew"
    return RungResult(name="load", ok=True, metrics=metrics)
