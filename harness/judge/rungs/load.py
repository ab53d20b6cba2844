"""Load: the version imported in its worker, `custom_kernel` (or KernelBench's `ModelNew`) found; what its
source says of itself."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from harness.contract import source
from harness.contract.messages import Failure
from harness.contract.results import RungResult
from harness.judge.lacks import lacking
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
        needs = lacking(reply.err) or lacking(reply.trace)
        if needs:
            return RungResult(name="load", ok=None, skipped=needs, metrics=metrics, log=reply.trace)
        err = reply.err + _sibling_hint(run, reply.err)
        return RungResult(name="load", ok=False, err=err, metrics=metrics, log=reply.trace)
    if reply.entry == "ModelNew":  # a KernelBench version (harness.problem.kernelbench)
        metrics["entry"] = "ModelNew"
    return RungResult(name="load", ok=True, metrics=metrics)


def _sibling_hint(run: VersionRun, err: str) -> str:
    """A module the version imports that sits in its problem folder but is not copied beside versions."""
    missing = re.search(r"No module named '([\w.]+)'", err)
    if missing is None:
        return ""
    name = missing.group(1).split(".")[0]
    folder = run.problem.path.parent
    if not ((folder / f"{name}.py").is_file() or (folder / name).is_dir()):
        return ""
    return (
        f": {name} is in the problem folder, but only the files problem.py lists in version_files are copied beside "
        f'each version (version_files = ["{name}.py"])'
    )
