"""The selected version's Nsight Compute profile (the profile rung, asked for with `p`): the call as a whole, its
digest (speed of light, occupancy, stalls, Nsight Compute's findings, and what changed from the best's profile),
then each kernel's throughput, occupancy and launch, where the .ncu-rep report lies, and the in-kernel regions
proton timed where the version marks them."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from harness.contract.profile_digest import GAIN_WIDTH
from harness.contract.report import digest_against, region_text
from harness.contract.results import RungResult
from harness.contract.units import duration_us
from kerneltui.ui.widgets.text_view import TextView

# (key in a kernel's figures, column header, width, format)
COLUMNS: tuple[tuple[str, str, int, str], ...] = (
    ("time_us", "time", 10, "time"),
    ("dram_bytes", "DRAM MB", 9, "{:.1f}"),
    ("dram_gbps", "GB/s", 7, "{:.0f}"),
    ("sm_pct", "SM %", 6, "{:.0f}"),
    ("memory_pct", "mem %", 6, "{:.0f}"),
    ("occupancy_pct", "occ %", 6, "{:.0f}"),
    ("theoretical_occupancy_pct", "of max", 7, "{:.0f}"),
    ("registers", "regs", 5, "{:.0f}"),
    ("smem_bytes", "smem B", 7, "{:.0f}"),
    ("block", "block", 6, "{:.0f}"),
    ("grid", "grid", 8, "{:.0f}"),
)


def profile_lines(
    version: dict[str, Any] | None, profile: RungResult | None, best: tuple[str, RungResult | None] | None = None
) -> list[Text]:
    if version is None:
        return [Text("no version selected", style="dim")]
    name = version["name"]
    if profile is None:
        return [Text(f"{name}: no profile yet. p profiles it under Nsight Compute (needs a GPU and ncu).", style="dim")]
    if profile.ok is not True:
        why = profile.skipped or profile.err or "no figures"
        return [Text(f"{name}: not profiled: {why}", style="red" if profile.ok is False else "dim")]
    m = profile.metrics
    return [*_nsight_lines(name, m, best), *_region_lines(m)]


def _nsight_lines(name: str, m: dict[str, Any], best: tuple[str, RungResult | None] | None) -> list[Text]:
    if "whole" not in m:
        return [Text(f"{name}: no Nsight Compute figures: {m.get('ncu_note')}", style="dim")]
    whole = m["whole"]
    lines = [_whole_line(name, m, whole), *[_digest_line(line) for line in digest_against(m, best)], Text("")]
    header = Text(f"{'kernel':<28}", style="bold")
    for _, title, width, _ in COLUMNS:
        header.append(f"{title:>{width}}", style="bold")
    lines.append(header)
    for kernel in m.get("kernels") or []:
        lines.append(_kernel_line(kernel, kernel.get("name") == whole.get("main_kernel")))
    lines += [Text(""), Text(f"report {m.get('report')}  (open it with: ncu-ui {m.get('report')})", style="dim")]
    return lines


def _digest_line(line: str) -> Text:
    """Headings (what comes before the first colon of an unindented line) in bold, findings' estimates in yellow."""
    if line.startswith("  "):
        text = Text(line)
        if line.lstrip().startswith("est."):
            text.stylize("yellow", 0, len(line) - len(line.lstrip()) + GAIN_WIDTH)
        return text
    head, colon, rest = line.partition(":")
    return Text.assemble((head + colon, "bold"), rest) if colon else Text(line)


def _region_lines(m: dict[str, Any]) -> list[Text]:
    """The regions the version marks in its kernels (pl.scope), as proton timed them in one call."""
    if m.get("regions"):
        lines = [Text(""), Text("in-kernel regions (proton, one call)", style="bold")]
        return lines + [Text(f"  {region_text(r)}") for r in m["regions"]]
    if m.get("regions_note"):
        return [Text(""), Text(f"in-kernel regions: {m['regions_note']}", style="dim")]
    return []


def _whole_line(name: str, m: dict[str, Any], whole: dict[str, Any]) -> Text:
    line = Text(f"{name}  ", style="bold")
    line.append(f"{len(m.get('kernels') or [])} kernel(s), {duration_us(whole.get('time_us'))} on {m.get('case')}")
    if whole.get("dram_bytes") is not None:
        rate = f" at {whole['dram_gbps']:.0f} GB/s" if whole.get("dram_gbps") else ""
        line.append(f" · DRAM {whole['dram_bytes'] / 1e6:.1f} MB{rate}")
    line.append("   Nsight Compute, clocks as they were", style="dim")
    return line


def _kernel_line(kernel: dict[str, Any], main: bool) -> Text:
    name = str(kernel.get("name") or "?")
    line = Text(f"{name[:27]:<28}", style="bold" if main else "")
    for key, _, width, fmt in COLUMNS:
        value = kernel.get(key)
        if key == "dram_bytes" and value is not None:
            value = value / 1e6
        if value is None:
            cell = "·"
        elif fmt == "time":
            cell = duration_us(value)
        else:
            cell = fmt.format(value)
        line.append(f"{cell:>{width}}")
    return line


class ProfilePane(TextView):
    def show(
        self, version: dict[str, Any] | None, rungs: list[RungResult], best: tuple[str, RungResult | None] | None = None
    ) -> None:
        profile = next((r for r in rungs if r.name == "profile"), None)
        self.set_lines(profile_lines(version, profile, best))
