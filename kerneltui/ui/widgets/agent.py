"""The agent's transcript (what it said, each tool call and its result, what it was told) and the guidance sent."""

from __future__ import annotations

import os
from typing import Any

from rich.text import Text

from kerneltui.ui.widgets.rungs import wrapped
from kerneltui.ui.widgets.text_view import TextView

STATUS_STYLE = {"pass": "green", "fail": "red", "error": "red", "unverified": "yellow", "stopped": "dim"}


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def session_header(session: dict[str, Any], events: list[dict[str, Any]], running_here: bool) -> Text:
    turns = max((e["data"].get("turn", 0) for e in events if e["kind"] == "turn"), default=0)
    line = Text(f" {session.get('model') or '?'}", style="bold")
    versions = session.get("versions") or 0
    line.append(f" · {session.get('backend')} · turn {turns} · {versions} version{'s' * (versions != 1)}")
    if session.get("cost_usd") is not None:
        line.append(f" · ${session['cost_usd']:.2f}")
    if session.get("ended"):
        line.append(f"  ■ ended: {session.get('stop_reason') or '?'}", style="dim")
    elif running_here:
        line.append("  ● running", style="green")
        line.append("   x stops it", style="dim")
    elif alive(session.get("pid")):  # a headless agent or an MCP client: its own process stops it
        line.append(f"  ● running in pid {session.get('pid')}", style="green")
    else:
        line.append(f"  ended without a word (pid {session.get('pid')} is gone)", style="dim")
    return line


def session_figures_line(session: dict[str, Any]) -> Text:
    """Tokens, minutes, versions judged, the first pass and when, the median new file to verdict."""
    figures = session.get("figures") or {}
    said = []
    if session.get("input_tokens") is not None or session.get("output_tokens") is not None:
        said.append(f"{tokens(session.get('input_tokens'))} in · {tokens(session.get('output_tokens'))} out tokens")
    said.append(f"{figures.get('minutes', 0.0):.0f} min")
    said.append(f"{figures.get('judged', 0)} judged")
    if figures.get("first_pass"):
        said.append(f"first pass {figures['first_pass']} after {figures['first_pass_minutes']:.1f} min")
    else:
        said.append("no pass yet")
    if figures.get("verdict_median_s") is not None:
        said.append(f"new file → verdict {figures['verdict_median_s']:.1f} s (median)")
    return Text(" " + " · ".join(said), style="dim")


def tokens(count: int | None) -> str:
    if count is None:
        return "?"
    return f"{count / 1000:.1f}k" if count >= 1000 else str(count)


def event_lines(event: dict[str, Any], width: int) -> list[Text]:
    kind, text, data = event["kind"], event.get("text") or "", event.get("data") or {}
    clock = (event.get("created") or "")[11:19]
    if kind == "text":
        return _block(f"▸ agent   {clock}  ", text, width, "cyan", "")
    if kind == "feedback":
        return _block(f"▸ you     {clock}  ", text, width, "magenta", "")
    if kind == "tool_call":
        return [Text(f"  ⚙ {text}", style="bold")]
    if kind == "tool_result":
        return _tool_result(text, data, width)
    if kind == "turn":
        return []
    if kind in ("retry", "warning"):
        return [Text(f"  ↻ {text}" if kind == "retry" else f"  ! {text}", style="yellow")]
    if kind == "error":
        return _block("  ✗ error  ", text, width, "red", "red")
    if kind == "stop":
        return [Text(f"■ stopped {clock}: {text}", style="bold")]
    if kind == "thought":
        return _block("  thinks  ", text, width, "dim italic", "dim italic")
    if kind == "plan":
        return [plan_line(data.get("entries") or [])]
    if kind == "prompt":
        first = text.strip().splitlines()[0] if text.strip() else ""
        return [Text(f"▸ kerneltui {clock}  {first[: max(20, width - 22)]}", style="dim")]
    if kind == "permission":
        return [Text(f"? asked to run: {text}", style="bold yellow")]
    if kind == "permission_answer":
        return [Text(f"  answered: {text}", style="yellow")]
    if kind == "interrupt":
        return [Text(f"  ⏹ {text}", style="yellow")]
    if kind == "file_write":
        return [Text(f"  ✎ wrote {text}", style="dim")]
    if kind == "start":
        return [Text(f"● {clock}  {text}", style="bold")]
    if kind == "paused":
        return _block(f"⏸ paused  {clock}  ", text, width, "bold yellow", "yellow")
    if kind in ("grant", "resumed"):
        return [Text(f"▶ {clock}  {text}", style="yellow")]
    return [Text(f"  {kind}: {text}")]


PLAN_GLYPHS = {"completed": ("✓", "green"), "in_progress": ("◐", "yellow"), "pending": ("○", "dim")}


def plan_line(entries: list[dict[str, Any]]) -> Text:
    line = Text("plan  ", style="bold")
    for entry in entries:
        glyph, style = PLAN_GLYPHS.get(str(entry.get("status")), ("○", "dim"))
        line.append(f"{glyph} {entry.get('content', '')}  ", style=style)
    return line


def ask_lines(ask: Any) -> list[Text]:
    line = Text(f"? the agent wants to run: {ask.title}   ", style="bold yellow")
    kinds = {kind for _, _, kind in ask.options}
    for key, label, wanted in (("y", "allow once", "allow_once"), ("a", "always", "allow_always"), ("n", "deny", "")):
        if not wanted or wanted in kinds:
            line.append(f"[{key}] {label}  ", style="bold")
    return [line]


def _tool_result(text: str, data: dict[str, Any], width: int) -> list[Text]:
    """One line: the verdict of a written version (and why it failed), or how much a tool returned."""
    lines = text.strip().splitlines()
    first = lines[0] if lines else ""
    if data.get("tool") == "write_version" and data.get("status"):
        status = str(data["status"])
        line = Text("    → ", style="dim")
        line.append(first, style=STATUS_STYLE.get(status, ""))
        failed = next((x for x in lines[1:] if x.startswith("✗")), None)
        out = [line]
        if failed:
            out.append(Text(f"      {' '.join(failed.split())}"[: max(40, width)], style="red"))
        return out
    if not data.get("ok"):
        return [Text(f"    ✗ {first}", style="red")]
    summary = CONTEXT_SUMMARIES.get(str(data.get("tool")), lambda lines: f"{len(lines)} lines")(lines)
    return [Text(f"    → {summary}"[: max(40, width)], style="dim")]


def search_summary(lines: list[str]) -> str:
    """search_context's hits (`path:start-end  name  (k of n words)` lines, their matching lines indented)."""
    hits = [line.split("  (")[0] for line in lines if line and not line[0].isspace() and not line.startswith("[")]
    if not hits:
        return lines[0] if lines else "no hits"
    return f"{len(hits)} hit{'s' * (len(hits) != 1)}: " + " · ".join(" ".join(h.split()) for h in hits)


def read_summary(lines: list[str]) -> str:
    """read_file's window: numbered lines, and `[lines a-b of n; ...]` when there is more."""
    numbers = [int(word) for word in (line.split(maxsplit=1)[0] for line in lines if line.strip()) if is_number(word)]
    more = next((line[1:].split(";")[0] for line in lines if line.startswith("[lines ")), None)
    if more:
        return f"read {more}"
    return f"read lines {numbers[0]}-{numbers[-1]}" if numbers else f"{len(lines)} lines"


def is_number(word: str) -> bool:
    """A line number (ASCII digits, and not so many that int() refuses them: a transcript is the agent's words)."""
    return word.isascii() and word.isdigit() and len(word) < 12


CONTEXT_SUMMARIES = {"search_context": search_summary, "read_file": read_summary}


def _block(prefix: str, text: str, width: int, prefix_style: str, style: str) -> list[Text]:
    body = wrapped(text.strip(), max(40, width - len(prefix)))
    lines = []
    for i, part in enumerate(body):
        line = Text(prefix if i == 0 else " " * len(prefix), style=prefix_style)
        line.append(part.lstrip() if i else part, style=style)
        lines.append(line)
    return lines


def guidance_lines(problem: str | None, guidance: list[dict[str, Any]]) -> list[Text]:
    mine = [g for g in guidance if problem is None or g["problem"] == problem]
    if not mine:
        return [Text("No guidance sent yet: press i, type, Enter.", style="dim")]
    lines = [Text(f"guidance for {problem}", style="bold")]
    for item in reversed(mine):
        line = Text(f"▸ {(item.get('who') or 'you'):<8} {(item.get('created') or '')[11:19]}  ", style="cyan")
        line.append(item.get("text") or "")
        delivered = item.get("delivered")
        line.append("  (delivered)" if delivered else "  (waiting for an agent's next turn)", style="dim")
        lines.append(line)
    return lines


def agent_lines(
    problem: str | None,
    session: dict[str, Any] | None,
    events: list[dict[str, Any]],
    guidance: list[dict[str, Any]],
    running_here: bool,
    width: int,
    ask: Any = None,
) -> list[Text]:
    if session is None:
        lines = [
            Text(
                f"No agent has worked on {problem or 'this problem'} yet: s starts one "
                "(Claude with ANTHROPIC_API_KEY, or [agent] backend in the config).",
                style="dim",
            ),
            Text(""),
        ]
    else:
        lines = [session_header(session, events, running_here), session_figures_line(session), Text("")]
        for event in events:
            lines += event_lines(event, width)
        if ask is not None:
            lines += ask_lines(ask)
        lines.append(Text(""))
    return lines + guidance_lines(problem, guidance)


class AgentPane(TextView):
    def show(self, lines: list[Text]) -> None:
        at_end = self.scroll_offset.y >= self.max_scroll_y - 1
        self.set_lines(lines, keep_scroll=True)
        if at_end:  # following the transcript, as a terminal does
            self.scroll_end(animate=False)
