"""Where NVIDIA's command-line tools are: Nsight Compute (`ncu`) and compute-sanitizer, found one way."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def cuda_tool(variable: str, name: str, installed: list[Path]) -> str | None:
    """The environment's `variable` (a path, or "none" to turn the tool off), else `name` on PATH, else the first of
    `installed` (the places CUDA and its tools install to, newest first) that exists."""
    chosen = os.environ.get(variable)
    if chosen:
        return None if chosen == "none" else chosen
    found = shutil.which(name)
    if found:
        return found
    return next((str(p) for p in installed if p.exists()), None)


def newest_first(pattern: str, root: Path = Path("/")) -> list[Path]:
    return sorted(root.glob(pattern.lstrip("/")), reverse=True)
