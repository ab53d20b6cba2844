"""Nsight Compute's .ncu-rep reports read into figures in our units: one reader for the timing check
(harness.judge.nsight.timing) and the profile rung. NVIDIA's ncu_report module does the reading, in a process of its
own (harness/judge/nsight/ncu_read.py): its native library crashed the judge beside torch's CUDA libraries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness import PACKAGE_DIR

READ_TIMEOUT_S = 120
SECONDS = {
    "ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1.0, "second": 1.0,
}  # fmt: skip
PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
# Our name -> (Nsight Compute's metric, the unit we keep it in)
Metrics = dict[str, tuple[str, str]]


def read_report(
    path: Path, ncu: str, metrics: Metrics, families: dict[str, str] | None = None, rules: bool = False
) -> list[dict[str, Any]]:
    """Each profiled kernel's {"name": ..., our name: figure or None}, in launch order. `families`: our name ->
    a metric name prefix, each kernel's metrics of that prefix kept as {rest of the name: value} under our name;
    `rules`: its rule results under "rules" as Nsight Compute gives them. Raises where the report cannot be read
    here (no ncu_report beside `ncu`, the reader failed)."""
    extras = report_module_dir(ncu)
    if extras is None:
        raise FileNotFoundError(f"no extras/python/ncu_report.py beside {ncu} or in its Nsight Compute installs")
    families = families or {}
    names = [name for name, _ in metrics.values()] + [f"{prefix}*" for prefix in families.values()]
    script = PACKAGE_DIR / "judge" / "nsight" / "ncu_read.py"
    done = subprocess.run(
        [sys.executable, str(script), str(path), str(extras), *(["--rules"] if rules else []), *names],
        capture_output=True, text=True, timeout=READ_TIMEOUT_S,
    )  # fmt: skip
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        raise RuntimeError(f"ncu_report failed: {tail[0][:200]}")
    return [_in_our_terms(k, metrics, families, rules) for k in json.loads(done.stdout)]


def _in_our_terms(kernel: dict[str, Any], metrics: Metrics, families: dict[str, str], rules: bool) -> dict[str, Any]:
    found = kernel["metrics"]
    ours: dict[str, Any] = {"name": kernel["name"]}
    ours.update({name: in_our_unit(found.get(metric), unit) for name, (metric, unit) in metrics.items()})
    for family, prefix in families.items():
        ours[family] = {
            metric[len(prefix) :]: float(figure[0])
            for metric, figure in found.items()
            if metric.startswith(prefix) and figure is not None
        }
    if rules:
        ours["rules"] = [r for r in kernel.get("rules") or [] if isinstance(r, dict)]
    return ours


def report_module_dir(ncu: str, opt: Path = Path("/opt/nvidia/nsight-compute")) -> Path | None:
    """Where ncu_report lives. CUDA's bin/ncu is often a script that runs the newest Nsight Compute from
    ../nsight-compute-VERSION or /opt/nvidia/nsight-compute/VERSION: the module is there, not beside it."""
    real = Path(ncu).resolve().parent
    beside = real / "extras" / "python"
    if (beside / "ncu_report.py").is_file():
        return beside
    installs = [*real.parent.glob("nsight-compute-*"), *opt.glob("*")]
    found = [d / "extras" / "python" for d in installs if (d / "extras" / "python" / "ncu_report.py").is_file()]
    return max(found, key=lambda d: _version(d.parent.parent.name), default=None)


def _version(name: str) -> tuple[int, ...]:
    digits = name.rsplit("-", 1)[-1].split(".")
    return tuple(int(d) for d in digits if d.isdigit())


def in_our_unit(figure: list[Any] | None, unit: str) -> float | None:
    """[value, Nsight Compute's unit] -> the value in ours (µs, bytes, GB/s, MHz); None when not collected or in a
    unit we cannot convert (never a figure off by a factor of 1000)."""
    if figure is None:
        return None
    value, reported = float(figure[0]), str(figure[1])
    if unit in ("", "%"):
        return value
    top, _, per = reported.partition("/")
    if unit == "us":
        return value * SECONDS[reported] * 1e6 if reported in SECONDS else None
    if unit == "MHz":
        return _megahertz(value, top, per)
    size = _bytes(top)
    if size is None:
        return None
    if unit == "byte":
        return value * size  # "byte/block" is per block already
    return value * size / SECONDS[per] / 1e9 if per in SECONDS else None  # GB/s


def _megahertz(value: float, top: str, per: str) -> float | None:
    """A rate of cycles ("cycle/nsecond", "cycle/second") or a frequency ("GHz", or "Ghz" as ncu writes it) in MHz."""
    if top[-2:].lower() == "hz" and top[:-2] in PREFIX and not per:
        return value * PREFIX[top[:-2]] / 1e6
    return value / SECONDS[per] / 1e6 if top == "cycle" and per in SECONDS else None


def _bytes(word: str) -> float | None:
    for name in ("byte", "B"):
        if word.endswith(name) and word[: -len(name)] in PREFIX:
            return PREFIX[word[: -len(name)]]
    return None
