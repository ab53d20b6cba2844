"""The agent's transcript and tool calls (no agent is attached yet), and the guidance sent so far."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from kerneltui.widgets.text_view import TextView


def guidance_lines(problem: str | None, guidance: list[dict[str, Any]]) -> list[Text]:
    lines = [
        Text("No agent is attached to this problem: its transcript and tool calls will show here.", style="dim"),
        Text(""),
    ]
    mine = [g for g in guidance if problem is None or g["problem"] == problem]
    if not mine:
        lines.append(Text("No guidance sent yet: press i, type, Enter.", style="dim"))
        return lines
    lines.append(Text(f"guidance for {problem}", style="bold"))
    for item in reversed(mine):
        line = Text(f"▸ {(item.get('who') or 'you'):<8} {(item.get('created') or '')[11:19]}  ", style="cyan")
        line.append(item.get("text") or "")
        if not item.get("delivered"):
            line.append("  (not delivered: no agent)", style="dim")
        lines.append(line)
    return lines


class AgentPane(TextView):
    def show(self, problem: str | None, guidance: list[dict[str, Any]]) -> None:
        self.set_lines(guidance_lines(problem, guidance), keep_scroll=True)
