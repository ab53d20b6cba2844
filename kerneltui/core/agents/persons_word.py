"""The person's word on the Session: verdicts, their withdrawal and guidance, written to the history, the
problem's FEEDBACK.md and a configured tmux pane, each said as a Recorded event."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kerneltui.core.agents.feedback import person_spoke
from kerneltui.core.config import Config
from kerneltui.core.workspace import Workspace
from kerneltui.history.store import Store


@dataclass(frozen=True)
class Recorded:
    """A verdict or guidance reached the history (`verdict`, `guidance`), guidance reached a tmux pane
    (`delivery`; `warning` when it did not), or the history file was replaced (`history`)."""

    what: str
    text: str


class PersonsWord:
    """Mixed into the Session, which provides these."""

    workspace: Workspace
    config: Config
    who: str
    on_event: Callable[[Any], None]

    if TYPE_CHECKING:  # the Session's, where the writer and its lock live; declared here for the type checker

        def open_writer(self) -> Store: ...

    def record_verdict(self, row: dict[str, Any], verdict: str, reason: str | None, who: str | None = None) -> None:
        """`row`: the version's version_id, name and path."""
        with self.open_writer().held() as store:  # closing waits for the verdict to be written
            if store is None:
                return
            store.add_verdict(row["version_id"], verdict, reason or None, who or self.who)
            self.on_event(Recorded("verdict", f"{row['name']} {verdict}" + (f": {reason}" if reason else "")))
            self._person_spoke(store, Path(row["path"]).parent)

    def withdraw_verdict(self, problem: str, who: str | None = None) -> str | None:
        """Undoes the newest standing approval or rejection in the problem (a verdict 'withdrawn' is added, so
        the agent hears of it too); what was undone, or None when there was nothing to undo."""
        with self.open_writer().held() as store:
            if store is None:
                return None
            last = store.last_standing_verdict(problem)
            if last is None:
                return None
            store.add_verdict(last["version_id"], "withdrawn", f"was {last['verdict']}", who or self.who)
            said = f"{last['version']}: {last['verdict']} withdrawn"
            self.on_event(Recorded("verdict", said))
            self._person_spoke(store, self.workspace.root / problem)
            return said

    def record_guidance(self, problem: str, text: str, who: str | None = None) -> None:
        with self.open_writer().held() as store:
            if store is None:
                return
            store.ensure_problem(problem, str(self.workspace.root / problem))
            guidance_id = store.add_guidance(problem, text, who or self.who)
            self.on_event(Recorded("guidance", text))
            self._person_spoke(store, self.workspace.root / problem, text, guidance_id)

    def record_rewind(self, problem: str, version: dict[str, Any], source: str, who: str | None = None) -> str:
        """The problem's agent told to continue from `version` (a version row: version_id, name, path), its source
        quoted; recorded, so its next version is compared with that one. What was said."""
        with self.open_writer().held() as store:
            if store is None:
                return ""
            store.ensure_problem(problem, str(self.workspace.root / problem))
            store.add_rewind(problem, int(version["version_id"]), str(version["name"]), who or self.who)
        self.record_guidance(problem, rewind_guidance(version, source), who)
        return f"{problem}: the agent continues from {version['name']}"

    def _person_spoke(
        self, store: Store, folder: Path, text: str | None = None, guidance_id: int | None = None
    ) -> None:
        """The feedback file, and guidance typed into a configured tmux pane."""
        panes, write = self.config.tmux_panes, self.config.agent.feedback_file
        try:
            said = person_spoke(store, folder, panes, write, text, guidance_id)
        except (OSError, subprocess.SubprocessError) as exc:
            said = f"warning: {exc}"
        if said:
            warning = said.startswith("warning: ")
            self.on_event(Recorded("warning" if warning else "delivery", said.removeprefix("warning: ")))


MAX_REWIND_SOURCE = 400  # lines of the version quoted in the guidance


def rewind_guidance(version: dict[str, Any], source: str) -> str:
    lines = source.splitlines()
    cut = f"\n... ({len(lines) - MAX_REWIND_SOURCE} more lines in the file)" if len(lines) > MAX_REWIND_SOURCE else ""
    name, path = version["name"], Path(str(version.get("path") or f"{version['name']}.py")).name
    return (
        f"Rewind: continue from {name} ({path}), not from your latest version. Take its source as your base "
        f"for the next version and leave what came after it.\n--- {path} ---\n"
        + "\n".join(lines[:MAX_REWIND_SOURCE])
        + cut
    )
