"""The top line: workspace, device and its ceilings, the queue."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static


def status_text(
    root: str,
    device: dict[str, Any] | None,
    running: int,
    waiting: int,
    judges: str,
    agents: list[tuple[str, str]] | None = None,
) -> Text:
    text = Text()
    text.append(" kerneltui ", style="bold reverse")
    text.append(f"  {root}   ")
    if device:
        name = device.get("name", "?")
        arch = device.get("arch")
        text.append(f"{name}{' · ' + arch if arch else ''}", style="bold")
    else:
        text.append(judges, style="dim")
    text.append("   queue ")
    text.append(f"{running} running", style="yellow" if running else "dim")
    text.append(" · ")
    text.append(f"{waiting} waiting", style="yellow" if waiting else "dim")
    if agents:
        models = sorted({model for model, _ in agents})
        who = models[0] if len(models) == 1 else f"{len(agents)} agents"
        text.append(f"   agent {who} on {', '.join(problem for _, problem in agents)} ")
        text.append("●", style="green")
    return text


class StatusBar(Static):
    pass
