"""What a headless agent's session says on the terminal (`kerneltui agent`): the transcript as it happens,
verdicts as they land, judging done elsewhere, warnings, and the agent's permission requests."""

from __future__ import annotations

import sys
import threading
from typing import Any

LAST_ERROR = [""]  # the error print_event printed last, so the stop that repeats it is not printed again


def say_headless(session: Any, event: Any) -> None:
    """What a headless agent's session says on the terminal: judging elsewhere, warnings, permission asks."""
    from kerneltui.core.judging.scheduler import SchedulerEvent
    from kerneltui.core.session import PermissionWaiting

    if isinstance(event, SchedulerEvent) and event.kind == "deferred":
        print(f"note: kerneltui pid {event.data.get('pid')} judges this workspace; its results are used")
    elif isinstance(event, SchedulerEvent) and event.kind == "warning":
        print(f"warning: {event.data.get('message')}", file=sys.stderr)
    elif isinstance(event, SchedulerEvent) and event.kind == "finished":
        print(verdict_line(event), flush=True)
    elif isinstance(event, PermissionWaiting):
        ask_on_terminal(session, event.problem, event.ask)


def verdict_line(event: Any) -> str:
    """A verdict as it lands, in the headless transcript: the version, its status, its time and against the best."""
    data = event.data
    line = f"  ◆ judged {event.problem}/{event.version}: {data.get('status')}"
    if data.get("median_us"):
        line += f" · {data['median_us']:.1f} µs"
    if data.get("race") and data.get("vs_best"):
        line += f" · raced against the best back to back: {data['race']} ({data['vs_best']:.2f}×)"
    elif data.get("vs_best"):
        line += f" · {data['vs_best']:.2f}× the best"
    return line


def ask_on_terminal(session: Any, problem: str, ask: Any) -> None:
    """Headless permission requests: asked on the terminal when there is one, else denied."""
    if not sys.stdin.isatty():
        print(f"  ? denied (no terminal to ask): {ask.title}", flush=True)
        session.answer_permission(problem, "reject")
        return

    def prompt() -> None:
        reply = input(f"  ? the agent wants to run: {ask.title}  [y] allow once [a] always [n] deny: ").strip()
        kind = {"y": "allow_once", "a": "allow_always"}.get(reply.lower(), "reject")
        session.answer_permission(problem, kind)

    threading.Thread(target=prompt, daemon=True).start()


def print_event(kind: str, text: str, data: dict[str, Any]) -> None:
    """The transcript as it happens, for a terminal or a log."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if kind == "start":
        line = f"● {text}"
    elif kind == "text":
        line = f"agent: {text.strip()}"
    elif kind == "tool_call":
        line = f"  ⚙ {text}"
    elif kind == "tool_result":
        line = f"    {'→' if data.get('ok') else '✗'} {first}"
    elif kind == "feedback":
        line = f"  ▸ delivered: {text.strip()}"
    elif kind == "turn":
        line = turn_line(text, data)
    elif kind == "stop" and text == LAST_ERROR[0]:
        line = "■ stopped by the error above"  # said once, not twice
    elif kind == "stop":
        line = f"■ stopped: {text}"
    elif kind == "thought":
        line = f"  (thinks) {first}"
    elif kind == "prompt":
        line = f"kerneltui → agent: {first}"
    elif kind == "silent":
        line = f"  … {text} (still waiting)"
    elif kind == "paused":
        line = f"⏸ paused: {text}"
    elif kind == "resumed":
        line = f"▶ {text}"
    else:
        line = f"{kind}: {text}"
    LAST_ERROR[0] = text if kind == "error" else ""
    print(line, flush=True)


def turn_line(text: str, data: dict[str, Any]) -> str:
    """A turn's end: its tokens (where the agent reports them) and the session's cost so far."""
    cost = data.get("total_cost_usd")
    tokens = (
        f"in {data.get('input_tokens', 0)} · cache read {data.get('cache_read_tokens', 0)} · "
        f"out {data.get('output_tokens', 0)}"
        if "input_tokens" in data
        else ""
    )
    return f"— {text}" + (f" · {tokens}" if tokens else "") + (f" · ${cost:.4f} so far" if cost else "")
