"""How a ladder run is configured (kept free of torch so the CLI can start workers first)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.results import DEFAULT_RUNGS
from harness.source import MAX_VERSION_KB


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
    max_memory_mb: float | None = None  # the worker's memory; None: half the machine's (at least 4 GiB)
    confirm: bool = True  # judge a version again in a fresh worker before it can become the best
    best_us: float | dict[str, float] | None = None  # the best median so far (µs), or by device name
    max_version_kb: float = MAX_VERSION_KB  # a version file larger than this is refused, not judged

    def best_for(self, device_name: str) -> float | None:
        """The median to beat on this device; None: no best yet, so a passing version is confirmed."""
        if isinstance(self.best_us, dict):
            return self.best_us.get(device_name)
        return self.best_us

    @property
    def max_version_bytes(self) -> int:
        return int(self.max_version_kb * 1024)
