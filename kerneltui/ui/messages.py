"""Every custom Textual message of the dashboard, in one place."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from kerneltui.core.judging.scheduler import SchedulerEvent
from kerneltui.core.session import Detail

__all__ = ["Detail"]  # the dashboard's messages carry the session's Detail


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

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotLoaded)  # a newer reading makes an unshown older one moot


class DetailLoaded(Message):
    def __init__(self, detail: Detail | None) -> None:
        super().__init__()
        self.detail = detail

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DetailLoaded)


class RecordedMessage(Message):
    """A verdict or guidance reached the history, or guidance a tmux pane (kerneltui.core.session.Recorded)."""

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


class AgentPausedMessage(Message):
    """An agent's budget is spent and it waits for the person (posted from its thread)."""

    def __init__(self, problem: str, reason: str) -> None:
        super().__init__()
        self.problem = problem
        self.reason = reason


class PermissionAsked(Message):
    """An ACP agent asks the person for permission (posted from the agent's thread)."""

    def __init__(self, problem: str, ask: Any) -> None:
        super().__init__()
        self.problem = problem
        self.ask = ask
