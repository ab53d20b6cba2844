"""What the scheduler says to whoever runs it (the session, the headless CLI)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.contract.results import AskedKind

SchedulerEventKind = Literal[
    "queued",  # a version's evaluation waits for a judge
    "started",  # a judge took it
    "rung",  # one of its rungs finished
    "finished",  # judged: its status, whether it beat the best
    "failed",  # not judged to the end (the judge's, the problem's or the machine's fault)
    "judge",  # a judge is ready, on this device
    "problem",  # a problem folder appeared or its problem.py was read again
    "problem-changed",  # a problem's files changed on disk: shown, awaiting the person
    "accepted",  # the person accepted a problem's files
    "deleted",  # a version's file is gone
    "scan",  # the workspace was read at start
    "idle",  # nothing queued or being judged
    "deferred",  # another kerneltui judges this workspace
    "warning",  # something the person should read
]


@dataclass
class SchedulerEvent:
    """What changed, for the dashboard and the headless front ends."""

    kind: SchedulerEventKind
    evaluation_id: int | None = None
    problem: str | None = None
    version: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


# --- what the scheduler's own thread is asked to do (its inbox), besides its judges' messages ---------------------


@dataclass(frozen=True)
class Enqueue:
    """A version to judge: a file written (the watcher), or asked again (`force`)."""

    path: Path
    force: bool = False


@dataclass(frozen=True)
class Asked:
    """A version judged again as the person or an agent asked: "profile" (Nsight Compute, recorded beside its
    evaluation) or "sanitize" (the ladder and compute-sanitizer's tools, recorded as its evaluation)."""

    path: Path
    kind: AskedKind


@dataclass(frozen=True)
class AcceptProblem:
    """The person accepts a problem's changed files they were shown (their digest)."""

    problem: str
    digest: str


@dataclass(frozen=True)
class Deleted:
    path: Path


@dataclass(frozen=True)
class ProblemSeen:
    """A problem folder's problem.py written or created."""

    path: Path


@dataclass(frozen=True)
class Ignored:
    """A file named like a version that is not one (v008_fast.py): said once."""

    path: Path


@dataclass(frozen=True)
class Stop:
    pass
