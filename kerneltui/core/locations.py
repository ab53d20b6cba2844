"""Where kerneltui keeps its configuration (XDG base directories)."""

from __future__ import annotations

import os
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]  # the folder holding kerneltui/, harness/ and the shipped context/


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kerneltui"


def config_file() -> Path:
    return Path(os.environ.get("KERNELTUI_CONFIG") or config_dir() / "config.toml")
