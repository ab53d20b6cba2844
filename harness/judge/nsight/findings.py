"""Nsight Compute's rule results made into findings we keep: what each rule says, how sure it is of a gain.

The rules (the "OPT Est. Speedup: 45%" lines of Nsight Compute's Details page) come from ncu_report's
rule_results_as_dicts(), whose shape has changed between releases: the fields are looked for under each name
they have had, and a rule whose shape is not understood is kept with what could be read rather than dropped.
Rule messages carry Nsight Compute's links (`@section:WarpStateStats:Warp State Statistics@`): their labels are kept.
"""

from __future__ import annotations

import math
import re
from typing import Any

MAX_FINDINGS = 12
MAX_TEXT = 400
# Nsight Compute's links in rule messages: @section:SourceCounters:Source Counters@ (a target, then its label),
# @url:Hardware Model:https://...@ (a label, then the address); older ones end at the target: @section:X:
LINK = re.compile(r"@([a-z_]+):([^:@\n]*):([^@\n]*)@")
BARE_LINK = re.compile(r"@[a-z_]+:([^:\s@]+):")
# NvRules' MsgType, as the reader names it from ncu_report's constants (MsgType_OPTIMIZATION: "optimization"); the
# ints where no name came (0 none, 1 ok, 2 optimization, 3 warning, 4 error: Nsight Compute 2025.3's, seen on an H100)
SEVERITY = {0: "info", 1: "ok", 2: "opt", 3: "warn", 4: "error"}
SEVERITY_NAMES = {
    "none": "info",
    "ok": "ok",
    "optimization": "opt",
    "warning": "warn",
    "error": "error",
    "err": "error",
}
SPEEDUP_KINDS = ("global", "local")


def findings(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each rule that has something to say (not a bare "ok"), as {"rule", "section", "title", "text", "severity",
    "speedup_pct", "speedup_kind"}; estimated speedups first, largest first; at most MAX_FINDINGS."""
    found = [f for f in (finding(rule) for rule in rules) if f["severity"] != "ok" and (f["title"] or f["text"])]
    found.sort(key=lambda f: -(f["speedup_pct"] if f["speedup_pct"] is not None else -1.0))
    return found[:MAX_FINDINGS]


def finding(rule: dict[str, Any]) -> dict[str, Any]:
    message = rule.get("rule_message") or rule.get("message") or {}
    if not isinstance(message, dict):
        message = {"message": str(message)}
    speedup, kind = _speedup(rule.get("speedup_estimation") or rule.get("speedup") or {})
    if speedup is None and isinstance(rule.get("estimated_speedup_pct"), (int, float)):
        speedup = float(rule["estimated_speedup_pct"])
    return {
        "rule": str(rule.get("rule_identifier") or rule.get("name") or rule.get("rule_name") or "?")[:80],
        "section": str(rule.get("section_identifier") or "")[:80],
        "title": plain(message.get("title") or "")[:120],
        "text": plain(message.get("message") or rule.get("message_for_display") or "")[:MAX_TEXT],
        "severity": _severity(
            message.get("type_name") or message.get("type", message.get("message_type", message.get("provider_type")))
        ),
        "speedup_pct": speedup,
        "speedup_kind": kind,
    }


def plain(text: Any) -> str:
    """A rule message as one line of plain text: Nsight Compute's links reduced to their labels."""
    return " ".join(BARE_LINK.sub(r"\1", LINK.sub(_link_label, str(text))).split())


def _link_label(link: re.Match[str]) -> str:
    kind, first, second = link.groups()
    return (first or second) if kind == "url" else (second or first)


def _severity(kind: Any) -> str:
    if isinstance(kind, int):
        return SEVERITY.get(kind, "info")
    name = str(kind or "").lower().removeprefix("msg_")
    return SEVERITY_NAMES.get(name, "opt" if "optim" in name else "info")


def _speedup(estimate: Any) -> tuple[float | None, str | None]:
    """(estimated speedup in %, "global" or "local" where said): Nsight Compute's estimate of the run time a fix
    saves, of the whole kernel (global) or of the part the rule looks at (local)."""
    if not isinstance(estimate, dict):
        return None, None
    value = estimate.get("speedup", estimate.get("estimated_speedup"))
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return None, None
    kind = estimate.get("type_name") or estimate.get("type", estimate.get("provider_type", estimate.get("meaning")))
    name = next((k for k in SPEEDUP_KINDS if k in str(kind).lower()), None)
    return float(value), name
