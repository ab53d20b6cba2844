"""What the scheduler says to whoever runs it (the session, the headless CLI)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SchedulerEvent:
    """What changed, for the dashboard: queued, started, rung, finished, failed, judge, problem, deleted."""

    kind: str
    evaluation_id: int | None = None
    problem: str | None = None
    version: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Recorded:
    """A verdict or guidance reached the history (`verdict`, `guidance`), guidance reached a tmux pane
    (`delivery`; `warning` when it did not), or the history file was replaced (`history`)."""

    what: str
    text: str
