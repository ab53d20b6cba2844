"""Plain-text summaries of rungs and evaluations, shared by the CLI and the dashboard (no torch here)."""

from __future__ import annotations

import os
from typing import Any

from harness.contract.profile_digest import digest_lines
from harness.contract.results import Evaluation, RungResult
from harness.contract.units import TIME_NAME, duration_us, sig

MARKS = {True: "✓", False: "✗", None: "·"}
MAX_KERNEL_LINES = 8  # an agent's profile lists at most this many kernels after the digest


def rung_detail(rung: RungResult) -> str:
    """One line of what a rung found, in the person's units."""
    if rung.skipped:
        return f"skipped: {rung.skipped}"
    if rung.ok is False:
        return (rung.err or "failed").split("\n")[0]
    describe = _DETAILS.get(rung.name, _problem_rung_detail)
    try:
        return describe(rung.metrics)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return "passed" if rung.ok else ""  # metrics from another kerneltui, or cut short: never a crash


def _load_detail(m: dict[str, Any]) -> str:
    parts = ["/".join(m.get("dsls", []))]
    if m.get("notes"):
        parts.append(f'"{m["notes"].splitlines()[0][:70]}"')
    if m.get("warnings"):
        parts.append(f"⚠ {len(m['warnings'])} warning(s): {m['warnings'][0]}")
    return " · ".join(p for p in parts if p)


def _compile_detail(m: dict[str, Any]) -> str:
    """The first kernel compiled (on a GPU, the first correctness case's) is the headline."""
    kernels = m.get("kernels", [])
    how = f"({m.get('arch')}, {'JIT' if m.get('mode') == 'jit' else 'ahead of time'})"
    if not kernels:
        return f"no Triton, CuTeDSL or TileLang kernels {how}"
    head = kernels[0]
    smem = head.get("shared") or head.get("smem_bytes") or 0
    text = (
        f"{head['name']}: {head.get('registers', '?')} regs · {head.get('spill_bytes') or 0} B spilled · {smem} B smem"
    )
    if head.get("case"):
        text += f" for {head['case']}"
    if len(kernels) > 1:
        text += f" · {len(kernels)} kernels, up to {max(k.get('registers', 0) for k in kernels)} regs"
    return f"{text} {how}"


def _correctness_detail(m: dict[str, Any]) -> str:
    cases = m.get("n_cases", 0)
    text = f"{cases} cases × {m.get('n_seeds', 0)} seeds"
    if "max_abs" in m:
        psnr = "∞" if m.get("psnr") is None else f"{m['psnr']:.1f}"
        text += (
            f"  max abs {sig(m['max_abs'])}  max rel {sig(m['max_rel'])}  rmse {sig(m['rmse'])}"
            f"  psnr {psnr} dB  cos {m['cosine']:.7f}"
        )
    if m.get("mode") == "triton-interpreter":
        text += "  (Triton interpreter, one program at a time: races between programs and bench-size outputs unseen)"
    if m.get("held_to"):
        text += f"  · held to {m['held_to']}"
    for warning in m.get("warnings") or ():
        text += f"  ⚠ {warning}"
    return text


def _benchmark_detail(m: dict[str, Any]) -> str:
    first = m["cases"][0]
    text = (
        f"{TIME_NAME} {duration_us(first['median_us'])} (p20 {duration_us(first['p20_us'])} · p80 "
        f"{duration_us(first['p80_us'])} · ±{first['noise_pct']:.1f}% · n={first['n']}{_placed(first)})"
        f"  reference {duration_us(first['ref_median_us'])}"
    )
    if first.get("device_median_us") is not None:
        text += f"  device {duration_us(first['device_median_us'])} (CUPTI: its kernels alone)"
    text += _clocks_detail(first.get("clocks") or {})
    if m.get("speedup"):
        text += f"  {m['speedup']:.2f}× vs reference"
    if len(m["cases"]) > 1:
        text += f" (geomean over {len(m['cases'])} cases)"
    if m.get("race"):
        text += f"  · {race_text(m['race'])}"
    sanitized = (m.get("confirmed") or {}).get("sanitizer")
    if sanitized:  # judged again as a would-be best: whether compute-sanitizer looked, and if not, why
        notes = sanitized.get("notes") or []
        text += f"  · sanitizer: not all run ({'; '.join(notes)[:160]})" if notes else "  · sanitizer ✓"
    return text


def _placed(case: dict[str, Any]) -> str:
    """How the figure was taken where the calls rotated over copies of the inputs in device memory."""
    places = case.get("placements") or 1
    if places < 2:
        return ""
    return f" · the mean of {places} placements' medians, ±{case.get('placement_pct') or 0:.1f}% with others"


def race_text(result: dict[str, Any]) -> str:
    """'faster than v002 raced back to back (0.96× its time)', as people and agents read it."""
    if result.get("label") is None:
        return f"not raced against {result.get('against')}: {result.get('note')}"
    ratio = f"{result['ratio']:.2f}× its time"
    return {
        "faster": f"faster than {result['against']} raced back to back ({ratio})",
        "slower": f"slower than {result['against']} raced back to back ({ratio})",
        "same": f"the same speed as {result['against']} raced back to back ({ratio})",
    }.get(result["label"], f"ambiguous against {result['against']} raced back to back ({ratio}, noise "
                           f"{result['tolerance_pct']:.1f}%)")  # fmt: skip


def _clocks_detail(clocks: dict[str, Any]) -> str:
    """SM clock range while timed, and how much of that time the GPU held its clocks down, and why."""
    if "sm_mhz" not in clocks:
        return ""
    low, _, high = clocks["sm_mhz"]
    text = f"  SM {low}-{high} MHz" if low != high else f"  SM {low} MHz"
    if clocks.get("slowed_pct"):
        text += f", slowed {clocks['slowed_pct']:.0f}% of the time ({', '.join(clocks.get('reasons', []))})"
    return text


def _roofline_detail(m: dict[str, Any]) -> str:
    row = m["cases"][0]
    memory = row["bound"] == "memory"
    achieved, unit = (row["gbps"], "GB/s") if memory else (row["tflops"], "TFLOP/s")
    ceiling = row.get("ceiling") or ("copy" if memory else "matmul")
    value = row.get("ceiling_value") or (m["peaks"]["copy_gbps"] if memory else row["flops_peak_tflops"])
    shown = f"{achieved:.0f}" if memory else f"{achieved:.1f}"
    by = f" by {row['ceiling_by']}" if row.get("ceiling_by") else ""
    text = f"{shown} {unit} = {row['pct']:.0f}% of measured {ceiling} ({value:.0f} {unit}{by})"
    if row["pct"] > 100:
        text += " · above the measured ceiling"
    if row.get("datasheet_pct"):
        text += f" · {row['datasheet_pct']:.0f}% of datasheet ({row['datasheet_value']:g} {unit})"
    return text


def _dumps_detail(m: dict[str, Any]) -> str:
    if not m.get("files"):
        return m.get("note", "nothing to dump")
    return f"{' '.join(m.get('kinds', []))} → {_short_path(m.get('dir', ''))}"


def _problem_rung_detail(m: dict[str, Any]) -> str:
    """A problem's own rung: how many cases it checked and the largest of each figure its check returned."""
    cases = [c for c in m.get("cases", []) if isinstance(c, dict)]
    largest: dict[str, float] = {}
    for case in cases:
        for key, value in case.items():
            figure = isinstance(value, (int, float)) and not isinstance(value, bool)
            if figure and key not in ("case", "seed", "ok", "err", "log"):
                largest[key] = max(largest.get(key, value), value)
    return " · ".join([f"{len(cases)} cases", *(f"{key} ≤ {sig(value)}" for key, value in largest.items())])


def _short_path(path: str) -> str:
    """Relative to the current folder when it is below it: what a person would type."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def _profile_detail(m: dict[str, Any]) -> str:
    """Nsight Compute's view of the call: time, DRAM traffic and rate, the main kernel's throughput and occupancy;
    then how many in-kernel regions proton timed."""
    timed = f"; {len(m['regions'])} in-kernel region(s) (proton)" if m.get("regions") else ""
    if "whole" not in m:
        return f"no Nsight Compute figures ({m.get('ncu_note')}){timed}"
    w = m["whole"]
    parts = [f"{len(m['kernels'])} kernel(s) {duration_us(w['time_us'])}"]
    if w.get("dram_bytes") is not None:
        rate = f" at {w['dram_gbps']:.0f} GB/s" if w.get("dram_gbps") else ""
        parts.append(f"DRAM {w['dram_bytes'] / 1e6:.1f} MB{rate}")
    for key, label in (("sm_pct", "SM"), ("memory_pct", "memory"), ("occupancy_pct", "occupancy")):
        if w.get(key) is not None:
            parts.append(f"{label} {w[key]:.0f}%")
    if w.get("registers"):
        parts.append(f"{w['registers']:.0f} regs")
    return " · ".join(parts) + f"  (ncu, {m['case']}){timed}"


def _sanitize_detail(m: dict[str, Any]) -> str:
    """Each tool and what it found (compute-sanitizer); what kept a tool from checking, after."""
    tools = m.get("tools") or {}

    def mark(run: dict[str, Any]) -> str:
        return "✗" if run["findings"] else "·" if run["errors"] is None else "✓"

    marks = [f"{tool} {mark(run)}" for tool, run in tools.items()]
    notes = f"  (not checked: {'; '.join(m['notes'])[:200]})" if m.get("notes") else ""
    return " · ".join(marks) + f"  {m.get('findings', 0)} finding(s){notes}"


def profile_text(rung: RungResult, best: tuple[str, RungResult | None] | None = None) -> str:
    """The profile rung as an agent reads it: the digest (against `best`, the best version's name and profile,
    where given), each kernel where there are several, then the report's path and the in-kernel regions."""
    if rung.ok is not True:
        return f"not profiled: {rung.skipped or rung.err or 'no figures'}"
    m = rung.metrics
    lines = [f"profile: {_profile_detail(m)}", *digest_against(m, best)]
    kernels = m.get("kernels") or []
    if len(kernels) > 1:
        lines.append("kernels:")
        lines += [f"  {_kernel_text(k)}" for k in kernels[:MAX_KERNEL_LINES]]
    if m.get("report"):
        lines.append(f"report (Nsight Compute's own UI opens it): {m.get('report')}")
    if m.get("regions"):
        lines.append("in-kernel regions (proton, one call):")
        lines += [f"  {region_text(r)}" for r in m["regions"]]
    elif m.get("regions_note"):
        lines.append(f"in-kernel regions: {m['regions_note']}")
    return "\n".join(lines)


def digest_against(m: dict[str, Any], best: tuple[str, RungResult | None] | None) -> list[str]:
    """The profile's digest, against the best's profile where there is a best: "not profiled" where it has none."""
    if best is None:
        return digest_lines(m)
    name, profile = best
    if profile is None or profile.ok is not True or "whole" not in profile.metrics:
        return [*digest_lines(m), f"against {name} (the best): not profiled; profile it to see what changed"]
    return digest_lines(m, profile.metrics, f"{name} (the best)")


def _kernel_text(k: dict[str, Any]) -> str:
    parts = [duration_us(k.get("time_us"))]
    if k.get("dram_bytes") is not None:
        rate = f" at {k['dram_gbps']:.0f} GB/s" if k.get("dram_gbps") else ""
        parts.append(f"DRAM {k['dram_bytes'] / 1e6:.1f} MB{rate}")
    labelled = (
        ("sm_pct", "SM {:.0f}% of peak"), ("memory_pct", "memory {:.0f}% of peak"),
        ("occupancy_pct", "occupancy {:.0f}%"), ("theoretical_occupancy_pct", "theoretical {:.0f}%"),
        ("registers", "{:.0f} regs"), ("smem_bytes", "{:.0f} B smem"), ("block", "block {:.0f}"),
        ("grid", "grid {:.0f}"),
    )  # fmt: skip
    parts += [fmt.format(k[key]) for key, fmt in labelled if k.get(key) is not None]
    return f"{k.get('name')}: " + " · ".join(parts)


_DETAILS = {
    "load": _load_detail,
    "compile": _compile_detail,
    "correctness": _correctness_detail,
    "benchmark": _benchmark_detail,
    "roofline": _roofline_detail,
    "dumps": _dumps_detail,
    "sanitize": _sanitize_detail,
    "profile": _profile_detail,
}


def rung_line(rung: RungResult) -> str:
    seconds = f"{rung.seconds:.2f} s" if rung.seconds else "·"
    return f"{MARKS[rung.ok]} {rung.name:<12} {seconds:>8}   {rung_detail(rung)}"


def containment_summary(sandbox: str) -> str:
    """'bwrap + landlock ABI 7 + seccomp + no capabilities' from the worker's full description."""
    parts = [p.strip() for p in sandbox.split(";") if p.strip()]
    short = [p.split(":")[0] for p in parts if not p.startswith("files up to")]
    return " + ".join(short) or "unknown"


def trust_lines(ev: Evaluation) -> list[str]:
    """What a reviewer checks before believing the verdict: each flag with its reason, and the containment."""
    lines = [f"⚑ {flag.name}: {flag.reason}" for flag in ev.flags]
    if ev.sandbox:
        lines.append(f"contained: {containment_summary(ev.sandbox)}")
    return lines


def evaluation_text(ev: Evaluation) -> str:
    device = ev.device.get("name", "?")
    if ev.device.get("arch"):
        device += f" {ev.device['arch']}"
    lines = [f"{ev.problem} {ev.version}  {ev.status}  ({device}; {ev.seconds:.1f} s)"]
    if ev.error:
        lines.append(f"error: {ev.error}")
    lines += [rung_line(r) for r in ev.rungs]
    failed = next((r for r in ev.rungs if r.ok is False), None)
    if failed and failed.err and "\n" in failed.err.strip():
        lines.append("")
        lines.append(failed.err.strip())
    return "\n".join(lines)


def region_text(region: dict[str, Any]) -> str:
    """One region as a line: kernel, region path, then its figures (cycles first)."""
    figures = sorted(region["figures"].items(), key=lambda kv: (kv[0] != "cycles", kv[0]))
    shown = " · ".join(
        f"{name} {value:,.0f}" if abs(value) >= 100 else f"{name} {value:.3g}" for name, value in figures
    )
    return f"{region['kernel']} / {region['region']}: {shown}"
