"""How a ladder run is configured (kept free of torch so the CLI can start workers first)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.results import DEFAULT_RUNGS


@dataclass
class Options:
    rungs: tuple[str, ...] = DEFAULT_RUNGS
    timeout: float = 60.0
    arch: str = "sm_90"
    seeds_per_case: int = 2
    bench_budget_s: float = 1.0
    state_dir: Path | None = None
    confine: bool = True
    max_file_mb: float = 512.0  # the largest file the kernel's process may write, its log included
