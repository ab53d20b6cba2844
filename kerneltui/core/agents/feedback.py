"""For agents that speak neither ACP nor MCP: a feedback file in the problem folder, and guidance typed
into the tmux pane the agent runs in.

FEEDBACK.md is rewritten (atomically) after each evaluation, verdict and guidance: the latest
results with the failing rung's message, the best version so far, the person's verdicts and
guidance. An agent told to read it after each version gets what an ACP agent gets as messages.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from harness.contract.problem_files import FEEDBACK_FILE
from harness.contract.units import TIME_NAME, duration_us, sig
from kerneltui.history.store import Store

RECENT = 8
PASTE_PAUSE_S = 0.3


def feedback_text(store: Store, problem: str) -> str:
    rows = store.version_rows(problem)[:RECENT]
    lines = [f"# kerneltui feedback: {problem}", "", "Rewritten after every evaluation, verdict and guidance.", ""]
    best = store.best_passing_text(problem)
    if best:
        lines += [f"Best passing version: {best}", ""]
    lines += ["## Latest versions", ""]
    for row in rows:
        lines.append(f"- {version_line(row)}")
        if row.get("status") in ("fail", "error") and row.get("evaluation_id"):
            lines += [f"    {x}" for x in failure(store, row)]
    verdicts = store.recent_verdicts(problem, RECENT)
    if verdicts:
        lines += ["", "## Verdicts", ""]
        lines += [
            f"- {v['created'][:19]} {v['version']} {v['verdict']}" + (f": {v['reason']}" if v["reason"] else "")
            for v in verdicts
        ]
    guidance = store.guidance(problem, limit=RECENT)
    if guidance:
        lines += ["", "## Guidance from the person (newest first)", ""]
        lines += [f"- {g['created'][:19]} {g['text']}" for g in guidance]
    return "\n".join(lines) + "\n"


def version_line(row: dict[str, Any]) -> str:
    status = row.get("status") or "not judged"
    parts = [f"{row['name']}: {status}"]
    if row.get("failed_rung"):
        parts.append(f"failed at {row['failed_rung']}")
    if row.get("max_abs") is not None:
        parts.append(f"max abs error {sig(row['max_abs'])}")
    if row.get("median_us"):
        parts.append(f"{TIME_NAME} {duration_us(row['median_us'])}")
    if row.get("speedup"):
        parts.append(f"{row['speedup']:.2f}x vs reference")
    if row.get("roofline_pct"):
        parts.append(f"{row['roofline_pct']:.0f}% of roofline")
    if row.get("verdict"):
        parts.append(f"{row['verdict']}" + (f" ({row['verdict_reason']})" if row.get("verdict_reason") else ""))
    return ", ".join(parts)


def failure(store: Store, row: dict[str, Any]) -> list[str]:
    failed = next((r for r in store.rungs(row["evaluation_id"]) if r.ok is False), None)
    text = (failed.err if failed else row.get("error")) or ""
    return [line for line in text.strip().splitlines()[:6] if line.strip()]


def write_feedback(store: Store, folder: Path) -> Path | None:
    """Rewrites the problem's feedback file; None when the folder is gone (a deleted problem)."""
    if not folder.is_dir():
        return None
    target = folder / FEEDBACK_FILE
    temporary = folder / f".{FEEDBACK_FILE}.{os.getpid()}.writing"
    temporary.write_text(feedback_text(store, folder.name))
    os.replace(temporary, target)
    return target


def type_into_pane(pane: str, text: str, pause: float = PASTE_PAUSE_S) -> tuple[bool, str]:
    """Pastes text into a tmux pane as one bracketed paste, waits, presses Enter, then reads the pane
    back to confirm the text arrived. Returns (confirmed, what happened)."""
    flat = " ".join(text.split())
    steps = [
        ["tmux", "set-buffer", "-b", "kerneltui-guidance", "--", flat],
        ["tmux", "paste-buffer", "-p", "-d", "-b", "kerneltui-guidance", "-t", pane],
    ]
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        if done.returncode != 0:
            return False, f"tmux {argv[1]} failed: {done.stderr.strip() or done.returncode}"
    time.sleep(pause)  # a TUI agent takes a moment to take the paste in before Enter submits it
    subprocess.run(["tmux", "send-keys", "-t", pane, "Enter"], capture_output=True, timeout=10)
    time.sleep(pause)
    shown = subprocess.run(
        ["tmux", "capture-pane", "-p", "-J", "-t", pane, "-S", "-200"], capture_output=True, text=True, timeout=10
    )
    probe = flat[:40]
    if probe and probe in " ".join(shown.stdout.split()):
        return True, f"typed into tmux pane {pane}"
    return False, f"typed into tmux pane {pane}, but it does not show it"


def pane_for(panes: dict[str, str], problem: str) -> str | None:
    return panes.get(problem) or panes.get("default") or None


def person_spoke(
    store: Store,
    folder: Path,
    panes: dict[str, str],
    feedback_file: bool,
    guidance: str | None = None,
    guidance_id: int | None = None,
) -> str | None:
    """After a verdict or guidance: the feedback file again, and guidance typed into the agent's pane
    (then marked delivered). Returns what happened in the pane; None when no pane is configured."""
    if feedback_file:
        write_feedback(store, folder)
    pane = pane_for(panes, folder.name)
    if guidance is None or pane is None:
        return None
    confirmed, said = type_into_pane(pane, guidance)
    if confirmed and guidance_id is not None:
        store.mark_guidance_delivered(guidance_id, f"tmux {pane}")
    return said if confirmed else f"warning: {said}"
