"""Load: the version imported in its worker, `custom_kernel` (or KernelBench's `ModelNew`) found; what its
source says of itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.contract import source
from harness.contract.messages import Failure
from harness.contract.results import RungResult
from harness.problem.rung import rung

if TYPE_CHECKING:
    from harness.judge.context import JudgeContext, VersionRun


@rung("load")
def load(judge: JudgeContext, run: VersionRun) -> RungResult:
    metrics: dict[str, Any] = {
        "entry": "custom_kernel",
        "dsls": run.dsls or ["torch"],
        "notes": source.notes(run.text),
        "warnings": source.static_checks(run.text),
    }
    worker = judge.worker(run, "run")
    reply = judge.load_into(worker, run)
    run.ev.sandbox = worker.containment
    metrics["sandbox"] = run.ev.sandbox
    if judge.cuda and not (worker.ready is not None and worker.ready.cuda):
        err = (
            f"the GPU cannot be used inside the worker's sandbox ({run.ev.sandbox}): "
            "`kerneltui doctor` says what this box offers; --no-sandbox runs workers unconfined"
        )
        return RungResult(name="load", ok=False, err=err, metrics=metrics)
    if isinstance(reply, Failure):
        return RungResult(name="load", ok=False, err=reply.err, metrics=metrics, log=reply.trace)
    if reply.entry == "ModelNew":  # a KernelBench version (harness.problem.kernelbench)
        metrics["entry"] = "ModelNew"
    return RungResult(name="load", ok=True, metrics=metrics)
