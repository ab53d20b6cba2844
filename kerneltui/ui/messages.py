"""Every custom Textual message of the dashboard, in one place."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from kerneltui.core.scheduler import SchedulerEvent


class SchedulerChanged(Message):
    """Something happened in the queue or a judge (posted from the scheduler's thread)."""

    def __init__(self, event: SchedulerEvent) -> None:
        super().__init__()
        self.event = event


@dataclass
class Snapshot:
    """What the main screen shows, read from the history in a worker thread."""

    problems: list[dict[str, Any]] = field(default_factory=list)
    versions: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None
    pending: int = 0
    guidance: list[dict[str, Any]] = field(default_factory=list)
    agent_lines: list[Any] = field(default_factory=list)  # the Agent pane, built in the worker


class SnapshotLoaded(Message):
    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


@dataclass
class Detail:
    """The selected version's rungs, files and neighbours, for the detail panes."""

    version: dict[str, Any]
    rungs: list[Any] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""
    compare: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    compare_sources: dict[str, str] = field(default_factory=dict)
    compare_artifacts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    cases: list[dict[str, Any]] = field(default_factory=list)
    trends: list[dict[str, Any]] = field(default_factory=list)
    rung_lines: list[Any] = field(default_factory=list)  # built in the worker: the UI thread only shows them
    diffs: dict[str, list[Any]] = field(default_factory=dict)


class DetailLoaded(Message):
    def __init__(self, detail: Detail | None) -> None:
        super().__init__()
        self.detail = detail


class Recorded(Message):
    """A verdict or guidance reached the history."""

    def __init__(self, what: str, text: str) -> None:
        super().__init__()
        self.what = what
        self.text = text


class AgentFinished(Message):
    """An agent started from the dashboard ended (posted from its thread)."""

    def __init__(self, problem: str, reason: str, failed: bool) -> None:
        super().__init__()
        self.problem = problem
        self.reason = reason
        self.failed = failed


class PermissionAsked(Message):
    """An ACP agent asks the person for permission (posted from the agent's thread)."""

    def __init__(self, problem: str, ask: Any) -> None:
        super().__init__()
        self.problem = problem
        self.ask = ask
