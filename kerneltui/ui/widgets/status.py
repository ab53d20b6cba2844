"""The top line: workspace, device and its ceilings, each judge's load, the queue."""

from __future__ import annotations

import re
from typing import Any

from rich.text import Text
from textual.widgets import Static


def judge_label(state: dict[str, Any]) -> str:
    """GPU0 for a judge on this machine's GPU 0, box:GPU1 for one over ssh on box's GPU 1, box for one there with no
    GPU named; J0, J1 … (the judge's number) for the rest: judges sharing a machine with no GPU, Ray's actors."""
    where = str(state.get("where") or "")
    gpu = re.search(r"GPU (\d+)$", where)
    host = where.split()[1] if where.startswith("ssh ") and len(where.split()) > 1 else ""
    if gpu:
        return f"{host}:GPU{gpu.group(1)}" if host else f"GPU{gpu.group(1)}"
    return host or f"J{state.get('judge', '?')}"


def judge_load(states: list[dict[str, Any]], narrow: bool) -> Text:
    """Each judge busy (●), idle (○) or starting (◌); narrow: only how many of them are busy."""
    busy = sum(1 for s in states if s.get("busy"))
    if narrow:
        return Text(f"judges {busy}/{len(states)} busy", style="yellow" if busy else "dim")
    text = Text()
    for state in states:
        mark, style = ("●", "yellow") if state.get("busy") else ("○", "green") if state.get("ready") else ("◌", "dim")
        text.append(f" {judge_label(state)} ")
        text.append(mark, style=style)
    return text


def status_text(
    root: str,
    device: dict[str, Any] | None,
    running: int,
    waiting: int,
    judges: str,
    agents: list[tuple[str, str]] | None = None,
    load: list[dict[str, Any]] | None = None,
    width: int | None = None,
) -> Text:
    """`load`: Scheduler.judge_states(), shown only with more than one judge; compacted to fit `width`."""
    if load is None or len(load) < 2:
        return _line(root, device, running, waiting, judges, agents, None)
    text = _line(root, device, running, waiting, judges, agents, judge_load(load, narrow=False))
    if width is None or text.cell_len <= width:
        return text
    compact = judge_load(load, narrow=True)
    text = _line(root, device, running, waiting, judges, agents, compact)
    over = text.cell_len - width
    if over > 0:  # a long workspace path would still hide the load: its head gives way first
        root = "…" + root[min(len(root) - 1, over + 1) :]
        text = _line(root, device, running, waiting, judges, agents, compact)
    return text


def _line(
    root: str,
    device: dict[str, Any] | None,
    running: int,
    waiting: int,
    judges: str,
    agents: list[tuple[str, str]] | None,
    load: Text | None,
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
    if load is not None:
        text.append("  ")
        text.append_text(load)
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
