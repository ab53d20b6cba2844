"""The command palette's kerneltui commands (ctrl+p): verdicts, panes, problems."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from kerneltui.ui.app import KernelTUI


class KernelCommands(Provider):
    def commands(self) -> list[tuple[str, Callable[[], Any], str]]:
        app: KernelTUI = self.app  # type: ignore[assignment]
        found: list[tuple[str, Callable[[], Any], str]] = [
            ("Approve the selected version", app.action_approve, "a"),
            ("Reject the selected version…", app.action_reject, "r"),
            ("Judge the selected version again", app.action_rebench, "b"),
            ("Send guidance…", app.action_guide, "i"),
            ("Start an agent on this problem", app.action_start_agent, "s"),
            ("Stop this problem's agent", app.action_stop_agent, "x"),
            ("Diff: cycle previous / best / approved", app.action_diff, "d"),
            ("Search the pane on show", app.action_search, "/"),
            ("Help: keys", app.action_help, "?"),
        ]
        for tab in ("rungs", "diff", "trends", "asm", "agent"):
            found.append((f"Show the {tab.title()} pane", partial(app.action_tab, tab), ""))
        for problem in app.snapshot.problems:
            found.append((f"Open problem {problem['name']}", partial(app.select_problem, problem["name"]), ""))
        return found

    async def discover(self) -> Hits:
        for name, run, key in self.commands():
            yield DiscoveryHit(name, run, help=f"key {key}" if key else None)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, run, key in self.commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), run, help=f"key {key}" if key else None)
