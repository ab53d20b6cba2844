"""Rungs a problem.py defines (see harness.problem.rung.rung): its own checks of what a version returns.

Each case of `cases` is judged again with a fresh secret seed, as the correctness rung judges it; where the
outputs match the reference, the problem's check runs on them here in the judge. The problem is trusted;
the version's code runs only in its worker."""

from __future__ import annotations

import functools
import secrets
from typing import TYPE_CHECKING, Any

from harness.contract.results import RungResult
from harness.judge.rungs.correctness import check_case
from harness.problem.load import Problem, ProblemError, case_label
from harness.problem.rung import Rung

if TYPE_CHECKING:
    from harness.judge.context import JudgeContext, VersionRun


def on_ladder(defined: Rung) -> Rung:
    """A problem's rung as the ladder climbs it: after correctness passed, and any rung it names."""
    return Rung(
        name=defined.name,
        run=functools.partial(climb, defined),
        needs=("correctness", *defined.needs),
        after=defined.after,
        shares_skip=defined.shares_skip,
    )


def climb(defined: Rung, judge: JudgeContext, run: VersionRun) -> RungResult:
    worker = run.workers["run"]
    results: list[dict[str, Any]] = []
    first_error: str | None = None
    for case in run.problem.cases:
        seed = secrets.randbelow(2**31)
        run.ev.seeds.append(seed)
        called, inputs, outputs = check_case(judge, run, worker, case, seed)
        err: str | None = called["err"]
        figures: dict[str, Any] = {}
        if err is None:
            err, figures = _verdict(defined, run.problem, inputs, outputs)
        outcome = {**figures, "case": called["case"], "seed": seed, "ok": err is None, "err": err}
        if called.get("log"):
            outcome["log"] = called["log"]
        results.append(outcome)
        if outcome["err"] and first_error is None:
            first_error = f"case {case_label(case)} (seed {seed}): {outcome['err']}"
        if called.get("fatal"):
            break
    return RungResult(name=defined.name, ok=first_error is None, err=first_error, metrics={"cases": results})


def _verdict(
    defined: Rung, problem: Problem, inputs: tuple[Any, ...], outputs: Any
) -> tuple[str | None, dict[str, Any]]:
    """The check's answer: None passes, a string fails, a dict is figures (failing where its "err" is set)."""
    answer = defined.run(inputs, outputs)
    if answer is None:
        return None, {}
    if isinstance(answer, str):
        return answer or "the check failed", {}
    if isinstance(answer, dict):
        err = answer.get("err")
        return (str(err) if err else None), {str(k): v for k, v in answer.items() if k != "err"}
    raise ProblemError(
        f"{problem.name}: rung {defined.name!r} in problem.py returned a {type(answer).__name__}; "
        "it must return None (passed), a string (why it failed) or a dict of figures"
    )
