"""The command palette's kerneltui commands (ctrl+p): verdicts, panes, problems."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

from kerneltui.ui.base import DashboardBase  # the app's state; its actions are run by name
from kerneltui.ui.keys import BINDINGS, TABS
from kerneltui.ui.widgets.format import shown

OPEN_PROBLEM = "Open problem "


def key_of(app: DashboardBase, binding_id: str) -> str:
    """How the key bound to `binding_id` reads now ("A" after `approve = "A"`, "/" for slash), or ""."""
    for binding in BINDINGS:
        if isinstance(binding, Binding) and binding.id == binding_id:
            keys = app.config.keys.get(binding_id, binding.key)
            return ", ".join(app.get_key_display(Binding(k.strip(), "")) for k in keys.split(","))
    return ""


class KernelCommands(Provider):
    def commands(self) -> list[tuple[str, Callable[[], Any], str]]:
        app: DashboardBase = self.app  # type: ignore[assignment]

        def act(action: str) -> Callable[[], Any]:
            return partial(app.run_action, action)

        key = partial(key_of, app)  # the key in use: a remap in the config's [keys] shows here too
        found: list[tuple[str, Callable[[], Any], str]] = [
            ("Approve the selected version", act("approve"), key("approve")),
            ("Reject the selected version…", act("reject"), key("reject")),
            ("Judge the selected version again", act("rebench"), key("rebench")),
            ("Judge it again under compute-sanitizer", act("sanitize"), key("sanitize")),
            ("Profile it with Nsight Compute", act("profile"), key("profile")),
            ("Send guidance…", act("guide"), key("guide")),
            ("Start an agent on this problem", act("start_agent"), key("start_agent")),
            ("Stop this problem's agent", act("stop_agent"), key("stop_agent")),
            ("Grant the paused agent its budget again", act("grant_more"), key("grant_more")),
            ("Diff: cycle previous / best / approved", act("diff"), key("diff")),
            ("Search the pane on show", act("search"), key("search")),
            ("Judges: each GPU's load", act("judges"), key("gpus")),  # the app's own actions
            ("Help: keys", act("help"), key("help")),
        ]
        for tab in TABS:
            found.append((f"Show the {tab.title()} pane", act(f"tab('{tab}')"), ""))
        for problem in app.snapshot.problems:
            found.append((f"{OPEN_PROBLEM}{problem['name']}", partial(app.select_problem, problem["name"]), ""))
        return found

    async def discover(self) -> Hits:
        for name, run, key in self.commands():
            yield DiscoveryHit(shown(name, limit=200), run, text=name, help=f"key {key}" if key else None)

    async def search(self, query: str) -> Hits:
        """A problem's name as text, never markup (its folder's name): its matches are not highlighted."""
        matcher = self.matcher(query)
        for name, run, key in self.commands():
            score = matcher.match(name)
            if score > 0:
                display = shown(name, limit=200) if name.startswith(OPEN_PROBLEM) else matcher.highlight(name)
                yield Hit(score, display, run, text=name, help=f"key {key}" if key else None)
