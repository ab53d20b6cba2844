"""Comments on lines (C): on the Diff or Asm pane, or a version's source (v), the lines chosen with the arrows
(shift for a range) go with the next guidance typed, quoted with the version and where they are
(kerneltui.core.comments), so the agent reads what the comment is about."""

from __future__ import annotations

from typing import Any

from textual.widgets import Input, TabbedContent

from kerneltui.core.comments import CommentError, LineComment, comment_on
from kerneltui.ui.base import DashboardBase
from kerneltui.ui.widgets.asm import AsmPane
from kerneltui.ui.widgets.diff import DiffPane
from kerneltui.ui.widgets.text_view import TextView

GUIDANCE_PROMPT = "guidance ▸ press i, type what the agent should try next, Enter sends"
CHOOSE_FIRST = "choose lines first: ↑/↓ on the Diff or Asm pane or in the source (v), shift+↑/↓ for a range; then C"


class LineComments:
    """The chosen lines waiting for the comment typed in the guidance box."""

    def __init__(self, app: DashboardBase) -> None:
        self.app = app
        self.waiting: dict[str, Any] | None = None  # version, where, lines, first, last (1-based)

    def comment(self) -> None:
        """C on the Diff or Asm pane."""
        tab = self.app.query_one("#detail", TabbedContent).active
        detail = self.app.detail
        if tab not in ("diff", "asm") or detail is None:
            self.app.notify(CHOOSE_FIRST, timeout=6)
            return
        if tab == "diff":
            diff = self.app.query_one("#diff-view", DiffPane)
            view: TextView = diff
            where = f"the diff against {diff.target}"
        else:
            asm = self.app.query_one("#asm-pane", AsmPane)
            view, where = asm.view, f"its {asm.kind.upper()}"
        self.wait(str(detail.version.get("name") or "?"), where, [line.plain for line in view.lines], view.selected())

    def wait(self, version: str, where: str, lines: list[str], chosen: tuple[int, int] | None) -> None:
        """Lines `chosen` (0-based, inclusive) of `lines` wait for the comment typed next."""
        if chosen is None:
            self.app.notify(CHOOSE_FIRST, timeout=6)
            return
        first, last = chosen[0] + 1, chosen[1] + 1
        self.waiting = {"version": version, "where": where, "lines": lines, "first": first, "last": last}
        box = self.app.query_one("#guidance", Input)
        span = f"line {first}" if first == last else f"lines {first}-{last}"
        box.placeholder = f"comment on {version}, {where}, {span} (Enter sends it to the agent, Esc drops it)"
        box.focus()

    def drop(self) -> None:
        """Guidance asked for with i: no lines wait for it."""
        self.waiting = None
        if self.app.is_running:  # guidance typed as the app quits is still recorded
            self.app.query_one("#guidance", Input).placeholder = GUIDANCE_PROMPT

    def finish(self, text: str) -> str:
        """The guidance typed, with the lines waiting for it quoted before it (none waiting: as typed)."""
        waiting = self.waiting
        self.drop()
        if waiting is None:
            return text
        try:
            comment: LineComment = comment_on(text=text, **waiting)
        except CommentError as exc:
            self.app.notify(str(exc), severity="warning")
            return text
        return comment.guidance()
