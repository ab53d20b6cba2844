"""Sanitize (asked for: `kerneltui sanitize`, the dashboard, an agent's tool; and over every would-be best in
harness.judge.confirm): compute-sanitizer's memcheck, racecheck, initcheck and synccheck over one call of each
correctness case (harness.judge.sanitizer). A finding fails the version; a tool that could not run is a skip or a
note that says so."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.contract.results import RungResult
from harness.judge import sanitizer
from harness.problem.rung import rung

if TYPE_CHECKING:
    from harness.judge.context import JudgeContext, VersionRun


@rung("sanitize", needs=("correctness",))
def sanitize(judge: JudgeContext, run: VersionRun) -> RungResult:
    if not judge.cuda:
        return RungResult.skip("sanitize", "no GPU: compute-sanitizer checks kernels as they run on one")
    checked = sanitizer.check(judge, run)
    if checked.note is not None:
        return RungResult.skip("sanitize", checked.note)
    metrics = checked.to_json()
    if not any(r.errors is not None for r in checked.runs):
        return RungResult(name="sanitize", ok=None, skipped="; ".join(metrics["notes"])[:500], metrics=metrics)
    return RungResult(name="sanitize", ok=checked.failure() is None, err=checked.failure(), metrics=metrics)
