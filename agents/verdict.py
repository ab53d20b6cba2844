"""The ladder's verdict on one version: one type (`Judged`) for the agents, the MCP server's structured
output and anyone else who reads it as JSON (`Verdict`, its JSON shape, defined once here).

No `from __future__ import annotations` here: the MCP server hands `Verdict` to pydantic as its output
schema, and pydantic reads the TypedDicts' annotations as objects. typing_extensions' TypedDict,
because pydantic refuses typing's below Python 3.12 for nested TypedDicts.
"""

from dataclasses import dataclass, field
from typing import Any

from typing_extensions import TypedDict

from harness.contract.results import Flag, RungResult
from harness.contract.units import TIME_MEANS

# --- the JSON shape -----------------------------------------------------------------------------
# Named as the MCP clients see them in the output schema (the names become its title and $defs).


class Rung(TypedDict):
    """One rung of the ladder: ok is true (passed), false (failed) or null (skipped, saying why)."""

    name: str
    ok: bool | None
    err: str | None
    skipped: str | None
    seconds: float
    metrics: dict[str, Any]


class VerdictFlag(TypedDict):
    """Something to check before trusting a passing version: it is not the best until the person approves it."""

    name: str
    reason: str


class Verdict(TypedDict):
    """The ladder's verdict on a version. status: pass, fail, unverified, error, stopped (the server stopped
    while it waited) or judging (not judged yet: wait_for_verdict waits on); summary: the verdict rung by rung,
    with the failure's message."""

    problem: str
    version: str
    status: str
    failed_rung: str | None
    summary: str
    median_us: float | None
    median_us_is: str  # what median_us is (harness.contract.units.TIME_MEANS)
    roofline_pct: float | None
    speedup: float | None
    rungs: list[Rung]
    flags: list[VerdictFlag]


def rung_json(rung: RungResult) -> Rung:
    """A rung without its log: logs run long, and read_results' text says what failed."""
    return Rung(
        name=rung.name,
        ok=rung.ok,
        err=rung.err,
        skipped=rung.skipped,
        seconds=float(rung.seconds or 0.0),
        metrics=dict(rung.metrics or {}),
    )


# --- the verdict --------------------------------------------------------------------------------


@dataclass
class Judged:
    """The ladder's verdict on one version, as an agent sees it."""

    problem: str
    version: str
    status: str  # pass, fail, unverified, error, or stopped (the agent was stopped while it waited)
    summary: str  # rung by rung, errors cut to what matters: the text a model reads
    median_us: float | None = None
    roofline_pct: float | None = None
    speedup: float | None = None
    failed_rung: str | None = None
    flags: list[Flag] = field(default_factory=list)  # a flagged pass is not the best until approved
    rungs: list[RungResult] = field(default_factory=list)  # empty when it was never judged (stopped, error)

    def to_json(self) -> Verdict:
        return Verdict(
            problem=self.problem,
            version=self.version,
            status=self.status,
            failed_rung=self.failed_rung,
            summary=self.summary,
            median_us=self.median_us,
            median_us_is=TIME_MEANS,
            roofline_pct=self.roofline_pct,
            speedup=self.speedup,
            rungs=[rung_json(r) for r in self.rungs],
            flags=[VerdictFlag(name=f.name, reason=f.reason) for f in self.flags],
        )
