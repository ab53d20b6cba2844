"""A profile in at most ~25 lines: what Nsight Compute's report says matters, and what changed from the best's.

From the profile rung's figures (harness.judge.rungs.profile): the call's kernels and where its time went, the
longest kernel's speed of light (what bounds it), occupancy and its limiter, launch and waves, the stall reasons
that cost the most cycles, and Nsight Compute's own rule findings, largest estimated speedup first. Against the
best's profile: each figure before and after, and the findings that came, went or moved. The Profile pane, the
CLI's --json and the agents' profile tool all read these lines (no torch here).
"""

from __future__ import annotations

from typing import Any

from harness.contract.units import duration_us

MAX_LINES = 25
MAX_FINDINGS = 6
FINDING_CHARS = 150
GAIN_WIDTH = 16  # a finding's estimate ("est. 45% global"), padded: the findings' words line up
BOUND_PCT = 60.0  # a unit above this share of its peak bounds the kernel (Nsight Compute's SOL rule says so too)
STALL_WORDS = {
    "long_scoreboard": "long scoreboard (global/local memory)",
    "short_scoreboard": "short scoreboard (shared memory, MUFU)",
    "mio_throttle": "MIO throttle",
    "lg_throttle": "LG throttle (global/local queue)",
    "math_pipe_throttle": "math pipe throttle",
    "tex_throttle": "TEX throttle",
    "barrier": "barrier",
    "membar": "memory barrier",
    "wait": "fixed-latency wait",
    "not_selected": "not selected",
    "no_instruction": "no instruction",
    "branch_resolving": "branch resolving",
    "dispatch_stall": "dispatch",
    "drain": "drain",
    "imc_miss": "constant cache miss",
    "sleeping": "sleeping",
    "misc": "misc",
}
LIMITERS = (
    ("limit_registers", "registers"),
    ("limit_shared_mem", "shared memory"),
    ("limit_warps", "warps"),
    ("limit_blocks", "blocks per SM"),
)


def main_kernel(m: dict[str, Any]) -> dict[str, Any] | None:
    kernels = m.get("kernels") or []
    index = (m.get("whole") or {}).get("main_index")
    if isinstance(index, int) and 0 <= index < len(kernels):
        return kernels[index]
    return max(kernels, key=lambda k: k.get("time_us") or 0.0, default=None)


def digest_lines(m: dict[str, Any], best: dict[str, Any] | None = None, best_name: str | None = None) -> list[str]:
    """The digest of one profile's figures; with the best's figures, what changed from them after it."""
    kernel = main_kernel(m)
    if "whole" not in m or kernel is None:
        return [f"no Nsight Compute figures: {m.get('ncu_note') or 'no kernel profiled'}"]
    lines = [_call_line(m, kernel), *_kernel_lines(kernel)]
    findings = kernel.get("findings") or []
    lines.append(f"findings (Nsight Compute's rules, largest estimated speedup first; {len(findings)}):")
    lines += [f"  {finding_line(f)}" for f in findings[:MAX_FINDINGS]] or ["  none: no rule found anything to do"]
    if best is not None:
        lines += against_lines(m, best, best_name or "the best")
    return lines[:MAX_LINES]


def _call_line(m: dict[str, Any], kernel: dict[str, Any]) -> str:
    whole, kernels = m["whole"], m.get("kernels") or []
    total = whole.get("time_us") or 0.0
    share = f", {100 * (kernel.get('time_us') or 0.0) / total:.0f}% of it" if total and len(kernels) > 1 else ""
    took = f"{len(kernels)} kernel(s), {duration_us(whole.get('time_us'))} on {m.get('case')}"
    return f"{took}; longest {kernel.get('name')}{share}"


def _kernel_lines(k: dict[str, Any]) -> list[str]:
    lines = [f"speed of light: {sol_text(k)}"]
    lines.append(f"occupancy: {occupancy_text(k)}")
    lines.append(f"launch: {launch_text(k)}")
    stalls = stall_text(k)
    if stalls:
        lines.append(f"stalls: {stalls}")
    return lines


def sol_text(k: dict[str, Any]) -> str:
    sm, memory = k.get("sm_pct"), k.get("memory_pct")
    parts = [f"compute (SM) {_pct(sm)}", f"memory {_pct(memory)}"]
    units = [f"{label} {_pct(k.get(key))}" for key, label in (("dram_pct", "DRAM"), ("l2_pct", "L2"), ("l1_pct", "L1"))]
    units = [u for u in units if not u.endswith("·")]
    text = " · ".join(parts) + (f" ({', '.join(units)})" if units else "")
    if sm is None or memory is None:
        return text
    if max(sm, memory) >= BOUND_PCT:
        return text + f" → {'memory' if memory >= sm else 'compute'}-bound"
    return text + f" → neither above {BOUND_PCT:.0f}%: latency or too little work in flight"


def occupancy_text(k: dict[str, Any]) -> str:
    achieved, theoretical = k.get("occupancy_pct"), k.get("theoretical_occupancy_pct")
    text = f"achieved {_pct(achieved)} of a theoretical {_pct(theoretical)}"
    limits = [(k[key], label) for key, label in LIMITERS if isinstance(k.get(key), (int, float))]
    if limits:
        least = min(value for value, _ in limits)
        by = [label for value, label in limits if value == least]
        text += f"; limited by {' and '.join(by)} ({least:.0f} blocks/SM)"
    return text


def launch_text(k: dict[str, Any]) -> str:
    parts = []
    if k.get("grid") is not None and k.get("block") is not None:
        parts.append(f"grid {k['grid']:.0f} × block {k['block']:.0f}")
    if k.get("waves") is not None:
        parts.append(f"{k['waves']:.2f} waves/SM")
    if k.get("registers") is not None:
        parts.append(f"{k['registers']:.0f} regs/thread")
    if k.get("smem_bytes") is not None:
        parts.append(f"{k['smem_bytes'] / 1024:.1f} KiB smem/block")
    if k.get("issue_pct") is not None:
        parts.append(f"issue slots busy {_pct(k['issue_pct'])}")
    return " · ".join(parts) or "·"


def stall_text(k: dict[str, Any]) -> str:
    """The reasons warps waited most: cycles per issued instruction (WarpStateStats), else the share of sampled
    stalls (SourceCounters)."""
    if k.get("stalls"):
        ranked = list(k["stalls"].items())[:4]
        return "cycles per issued instruction: " + " · ".join(f"{_stall(r)} {v:.1f}" for r, v in ranked)
    if k.get("stall_samples"):
        total = sum(k["stall_samples"].values())
        ranked = list(k["stall_samples"].items())[:4]
        return "share of sampled warp stalls: " + " · ".join(f"{_stall(r)} {100 * v / total:.0f}%" for r, v in ranked)
    return ""


def finding_line(f: dict[str, Any]) -> str:
    if f.get("speedup_pct") is not None:
        kind = f" {f['speedup_kind']}" if f.get("speedup_kind") else ""
        gain = f"est. {f['speedup_pct']:.0f}%{kind}"
    else:
        gain = str(f.get("severity") or "info")
    words = f"{f.get('title') or f.get('rule')}: {f.get('text') or ''}".strip(": ")
    if len(words) > FINDING_CHARS:
        words = words[: FINDING_CHARS - 1] + "…"
    return f"{gain:<{GAIN_WIDTH}} {words}"


def against_lines(m: dict[str, Any], best: dict[str, Any], best_name: str) -> list[str]:
    """What changed from the best's profile: the call's time, the longest kernel's figures, the findings."""
    now, then = main_kernel(m), main_kernel(best)
    if now is None or then is None or "whole" not in best:
        return [f"against {best_name}: its profile has no Nsight Compute figures"]
    before, after = best["whole"].get("time_us"), m["whole"].get("time_us")
    change = f" ({100 * (after - before) / before:+.0f}%)" if before and after is not None else ""
    case = "" if best.get("case") == m.get("case") else f" (its profile ran on {best.get('case')})"
    lines = [f"against {best_name}: time {duration_us(before)} → {duration_us(after)}{change}{case}"]
    moved = [_moved(label, then.get(key), now.get(key), fmt) for key, label, fmt in COMPARED]
    moved = [text for text in moved if text]
    if moved:
        lines.append("  " + " · ".join(moved))
    lines += [f"  {text}" for text in _finding_changes(then.get("findings") or [], now.get("findings") or [])]
    return lines


COMPARED = (
    ("sm_pct", "SM", "{:.0f}%"),
    ("memory_pct", "memory", "{:.0f}%"),
    ("dram_pct", "DRAM", "{:.0f}%"),
    ("occupancy_pct", "occupancy", "{:.0f}%"),
    ("registers", "regs", "{:.0f}"),
    ("waves", "waves", "{:.2f}"),
    ("smem_bytes", "smem B", "{:.0f}"),
)


def _moved(label: str, before: Any, after: Any, fmt: str) -> str:
    if before is None or after is None or fmt.format(before) == fmt.format(after):
        return ""
    return f"{label} {fmt.format(before)} → {fmt.format(after)}"


def _finding_changes(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    then = {f["rule"]: f for f in before}
    now = {f["rule"]: f for f in after}
    lines = []
    came = [f"{r} ({_gain(now[r])})" for r in now if r not in then]
    gone = [f"{r} ({_gain(then[r])})" for r in then if r not in now]
    moved = [f"{r} {_gain(then[r])} → {_gain(now[r])}" for r in now if r in then and _gain(then[r]) != _gain(now[r])]
    for label, items in (("new findings", came), ("gone", gone), ("moved", moved)):
        if items:
            lines.append(f"{label}: {', '.join(items[:4])}" + (f" and {len(items) - 4} more" if len(items) > 4 else ""))
    return lines


def _gain(f: dict[str, Any]) -> str:
    return f"est. {f['speedup_pct']:.0f}%" if f.get("speedup_pct") is not None else str(f.get("severity"))


def _stall(reason: str) -> str:
    return STALL_WORDS.get(reason, reason.replace("_", " "))


def _pct(value: Any) -> str:
    return "·" if value is None else f"{value:.0f}%"
