"""One protocol for every agent backend: what an agent is given, what it may do, and when it stops.

An agent works on one problem through a `Host` (kerneltui implements it over the history and the
judges): it writes version files and gets the ladder's verdict on each, reads results and dumps,
and receives the person's guidance and verdicts. Everything it says and does goes to the host's
transcript. Backends implement `Agent.run`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agents.verdict import Judged  # the verdict the Host returns (backends import it from here too)

DEFAULT_MODEL = "claude-opus-4-6"  # the Claude backend's model when the config names none


@dataclass(frozen=True)
class ProblemInfo:
    name: str
    folder: Path  # <workspace>/<problem>
    workspace: Path
    context: Path | None  # the context folder agents may read and search
    source: str  # problem.py as written
    # Folders inside the roots that no agent tool opens: kerneltui's state (the history database, whose
    # locks a stray open and close inside kerneltui's process would drop, and the dumps).
    private: tuple[Path, ...] = ()

    @property
    def roots(self) -> tuple[Path, ...]:
        """Folders an agent's tools may read: the workspace and the context folder."""
        return (self.workspace,) + ((self.context,) if self.context else ())


@dataclass
class Budget:
    max_versions: int | None = None
    max_cost_usd: float | None = None
    target_roofline_pct: float | None = None

    def extended(self, versions: int | None, cost_usd: float | None) -> Budget:
        """This budget with more granted: `versions` more versions, `cost_usd` more dollars (None: as it was)."""
        return Budget(
            self.max_versions + versions if self.max_versions is not None and versions else self.max_versions,
            self.max_cost_usd + cost_usd if self.max_cost_usd is not None and cost_usd else self.max_cost_usd,
            self.target_roofline_pct,
        )


@dataclass
class Feedback:
    """Guidance typed by the person, or a verdict on a version."""

    kind: str  # "guidance" or "verdict"
    text: str
    who: str = ""
    created: str = ""
    version: str | None = None
    verdict: str | None = None

    def render(self) -> str:
        if self.kind == "verdict" and self.verdict == "withdrawn":
            return f"The person withdrew their verdict on {self.version} ({self.text or 'undone'})"
        if self.kind == "verdict":
            reason = f": {self.text}" if self.text else ""
            return f"The person {self.verdict} {self.version}{reason}"
        return f"Guidance from the person: {self.text}"


def render_feedback(items: list[Feedback]) -> str:
    return "\n".join(f"- {item.render()}" for item in items)


class Host(Protocol):
    """What kerneltui gives an agent. Methods may be called from the agent's own thread."""

    problem: ProblemInfo
    pauses_on_budget: bool  # False: a spent budget stops the agent (an unattended run, a benchmark)

    def write_version(self, code: str, notes: str, author: str) -> Judged:
        """Writes the next vNNN.py, waits for the ladder, returns its verdict."""
        ...

    def wait_verdict(self, version: str) -> Judged | None:
        """The version's verdict once it is final, waited for as write_version waits; None: no such version."""
        ...

    def results(self, version: str) -> Judged | None: ...

    def version_names(self) -> list[str]: ...

    def dumps(self, version: str) -> list[dict[str, Any]]:
        """The version's dump files: kind (ptx, sass, ttgir...), kernel, path."""
        ...

    def profile(self, version: str) -> str:
        """Profiles the version under Nsight Compute, waits for it, returns its figures as text (or why not)."""
        ...

    def sanitize(self, version: str) -> str:
        """Judges the version again under compute-sanitizer's tools, waits for it, returns the verdict as text."""
        ...

    def feedback(self) -> list[Feedback]:
        """Guidance and verdicts that arrived since the last call (guidance sent before the start too)."""
        ...

    def finished(self) -> list[Judged]:
        """Evaluations of this problem's versions that finished since the last call (or the session's start)."""
        ...

    def record(self, kind: str, text: str = "", **data: Any) -> None:
        """One transcript event: start, text, tool_call, tool_result, feedback, turn, retry, warning, error, stop."""
        ...

    def stop_requested(self) -> bool: ...

    def wait_for_more(self, reason: str, budget: Budget) -> Budget | None:
        """The budget is spent (`reason`): the agent waits, paused, until the person grants more (the budget it goes
        on with) or stops it (None)."""
        ...

    def judging(self) -> int:
        """Versions of this problem queued or being judged now."""
        ...

    def session_versions(self) -> int:
        """Versions written since this session started that were judged: what a version budget counts (old
        versions judged again at start are not this session's)."""
        ...


class Agent(Protocol):
    backend: str
    model: str

    def run(self, host: Host, budget: Budget) -> str:
        """Works until a budget, a target or a stop request ends it; returns why it stopped."""
        ...

    def cancel(self) -> None:
        """Asked from another thread: end any call in flight now."""
        ...


def best_roofline(judged: list[Judged]) -> float | None:
    """The best % of roofline among passing versions (for the target), None before one has a figure."""
    return max((j.roofline_pct for j in judged if j.status == "pass" and j.roofline_pct), default=None)


def spent_reason(budget: Budget, versions: int, cost_usd: float) -> str | None:
    """Which budget is spent (versions or cost), or None."""
    if budget.max_versions is not None and versions >= budget.max_versions:
        return f"wrote {versions} version{'s' * (versions != 1)} (the budget)"
    if budget.max_cost_usd is not None and cost_usd >= budget.max_cost_usd:
        return f"spent ${cost_usd:.2f} (budget ${budget.max_cost_usd:.2f})"
    return None


def target_reason(budget: Budget, best_pct: float | None) -> str | None:
    if budget.target_roofline_pct is not None and best_pct is not None and best_pct >= budget.target_roofline_pct:
        return f"reached {best_pct:.0f}% of roofline (target {budget.target_roofline_pct:.0f}%)"
    return None


def budget_reason(budget: Budget, versions: int, cost_usd: float, best_pct: float | None) -> str | None:
    """Why the budget says stop, or None."""
    return spent_reason(budget, versions, cost_usd) or target_reason(budget, best_pct)


def go_on(host: Host, budget: Budget, versions: int, cost_usd: float, best_pct: float | None) -> tuple[Budget, str]:
    """(the budget to go on with, "") or (it, why to stop): a target reached stops the agent; a budget spent
    pauses it until the person grants more (then it goes on with that) or stops it, where the host pauses."""
    while True:
        reached = target_reason(budget, best_pct)
        if reached:
            return budget, reached
        spent = spent_reason(budget, versions, cost_usd)
        if not spent or not host.pauses_on_budget:
            return budget, spent or ""
        more = host.wait_for_more(spent, budget)
        if more is None:
            return budget, f"{spent}; stopped while paused"
        budget = more
