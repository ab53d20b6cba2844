"""The selected version's rung results: one line each, then what failed in full, per-case errors,
the kernels' resources and (Enter) the logs."""

from __future__ import annotations

import textwrap
from typing import Any

from rich.text import Text

from harness.contract.report import containment_summary, rung_detail, sig
from harness.contract.results import RungResult
from harness.contract.text import cut, printable
from kerneltui.ui.messages import Detail
from kerneltui.ui.widgets.format import BLOCK_CHARS, first_line, next_rung, row_flags, text_lines
from kerneltui.ui.widgets.text_view import TextView

MARK_STYLE = {True: ("✓", "green"), False: ("✗", "red"), None: ("·", "dim")}


def header_line(version: dict[str, Any]) -> Text:
    line = Text()
    line.append(f"{version['name']}  ", style="bold")
    note = first_line(version.get("notes"))  # cut where it is shown, the cut said
    if note:
        line.append(f'"{note}"', style="italic")
    meta = " · ".join(x for x in (version.get("author") or "", (version.get("version_created") or "")[11:19]) if x)
    if meta:
        line.append(f"   {meta}", style="dim")
    if version.get("deleted"):
        line.append("   file deleted (history kept)", style="red")
    return line


def rung_line(rung: RungResult) -> Text:
    mark, style = MARK_STYLE[rung.ok]
    line = Text()
    line.append(f"{mark} ", style=style)
    line.append(f"{rung.name:<12}", style="bold" if rung.ok is not None else "dim")
    line.append(f"{rung.seconds:>7.2f} s   " if rung.seconds else f"{'·':>9}   ", style="dim")
    line.append(rung_detail(rung), style="red" if rung.ok is False else ("dim" if rung.skipped else ""))
    return line


def case_lines(cases: list[dict[str, Any]]) -> list[Text]:
    if not cases:
        return []
    lines = [
        Text(
            "case                                seed          max abs   max rel   rmse      psnr    cos",
            style="bold dim",
        )
    ]
    for case in cases:
        psnr = "∞" if case.get("psnr") is None and case.get("max_abs") == 0 else sig(case.get("psnr"), 3)
        cosine = f"{case['cosine']:.6f}" if case.get("cosine") is not None else "·"
        row = Text(
            f"{(case.get('case_label') or '')[:34]:<35} {case.get('seed') or '':<13} "
            f"{sig(case.get('max_abs')):<9} {sig(case.get('max_rel')):<9} {sig(case.get('rmse')):<9} "
            f"{psnr:<7} {cosine}",
            style="" if case.get("ok") else "red",
        )
        lines.append(row)
        if case.get("err") and not case.get("ok"):
            lines += [Text(f"    {x}", style="red") for x in wrapped(case["err"], 116)]
    return lines


def kernel_lines(rungs: list[RungResult]) -> list[Text]:
    compiled = next((r for r in rungs if r.name == "compile"), None)
    kernels = compiled.metrics.get("kernels", []) if compiled else []
    if not kernels:
        return []
    lines = [Text("kernel                         regs  spilled  smem      warps stages  case", style="bold dim")]
    for k in kernels:
        smem = k.get("shared") or k.get("smem_bytes") or 0
        lines.append(
            Text(
                f"{k['name'][:30]:<30} {k.get('registers', '?'):>4}  {k.get('spill_bytes') or 0:>5} B "
                f"{smem:>7} B  {k.get('num_warps', '·'):>5} {k.get('num_stages', '·'):>6}  {k.get('case', '')}"
            )
        )
    return lines


def trust_lines(version: dict[str, Any], width: int) -> list[Text]:
    """Each flag with its reason (a flagged version is not the best until approved), then the containment."""
    lines: list[Text] = []
    for flag in row_flags(version):
        for i, part in enumerate(wrapped(f"⚑ {flag.name}: {flag.reason}", width)):
            lines.append(Text(part, style="bold yellow" if i == 0 else "yellow"))
    if version.get("sandbox"):
        lines.append(Text(f"  contained: {containment_summary(str(version['sandbox']))}", style="dim"))
    return lines


def wrapped(text: str, width: int) -> list[str]:
    """Long error text folded to the pane, so the mismatching indices are on screen: written out and cut before it
    is folded (a megabyte of text is not wrapped to be shown)."""
    out: list[str] = []
    for line in printable(cut(text, BLOCK_CHARS)).split("\n"):
        out += textwrap.wrap(line, width=max(40, width), subsequent_indent="    ") or [""]
    return out


def detail_lines(detail: Detail, expanded: bool, width: int = 120) -> list[Text]:
    version = detail.version
    lines = [header_line(version), Text("")]
    lines += [rung_line(r) for r in detail.rungs]
    lines += trust_lines(version, width)
    status = version.get("status")
    if status == "running":
        lines.append(Text(f"◐ {next_rung(version.get('last_rung'))} …", style="yellow"))
    elif status == "queued":
        lines.append(Text("○ queued", style="dim"))
    if version.get("error"):
        lines += [Text(""), *text_lines(str(version["error"]), style="red")]
    failed = next((r for r in detail.rungs if r.ok is False), None)
    if failed and failed.err:
        lines += [Text(""), Text(f"{failed.name} failed:", style="bold red")]
        lines += [Text(f"  {x}", style="red") for x in wrapped(failed.err, width)]
    if detail.cases:
        lines += [Text(""), *case_lines(detail.cases)]
    kernels = kernel_lines(detail.rungs)
    if kernels:
        lines += [Text(""), *kernels]
    logs = [r for r in detail.rungs if r.log]
    if logs and expanded:
        for rung in logs:
            lines += [Text(""), Text(f"── {rung.name} log ──", style="bold dim")]
            lines += text_lines(rung.log or "")
    elif logs:
        lines += [Text(""), Text(f"Enter shows the logs of {', '.join(r.name for r in logs)}", style="dim")]
    return lines


class RungsPane(TextView):
    expanded = False

    def show(self, detail: Detail | None, keep_scroll: bool = False) -> None:
        if detail is None:
            self.set_lines([Text("No version selected.", style="dim")])
            return
        width = self.scrollable_content_region.width - 4 if self.is_mounted else 116
        self.set_lines(detail_lines(detail, self.expanded, width), keep_scroll=keep_scroll)
