"""The TOML configuration: key bindings, how the ladder runs, and dashboard habits.

# ~/.config/kerneltui/config.toml
[keys]            # binding id = key(s), comma-separated; ids are listed by `?` in the dashboard
approve = "A"
reject = "R,ctrl+r"

[ladder]
python = "/opt/torch/.venv/bin/python3"   # the GPU box's Python (default: kerneltui's own)
timeout = 60                                # seconds per call into a version
arch = "sm_90"                              # compile target with no GPU
seeds = 2                                   # seeds per correctness case
judges = 1                                  # judge processes with no GPU (one per GPU otherwise)
debounce = 0.2                              # seconds a file must stay unchanged before it is judged

[ui]
bell = true                                 # ring when a version beats the best or the queue empties
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kerneltui.locations import config_file


class ConfigError(Exception):
    """The config file is not valid; the message names the file and the key."""


@dataclass
class LadderConfig:
    python: str | None = None
    timeout: float = 60.0
    arch: str = "sm_90"
    seeds: int = 2
    judges: int = 1
    debounce: float = 0.2


@dataclass
class Config:
    keys: dict[str, str] = field(default_factory=dict)
    ladder: LadderConfig = field(default_factory=LadderConfig)
    bell: bool = True
    path: Path | None = None


def load(path: Path | None = None) -> Config:
    path = path or config_file()
    if not path.is_file():
        return Config(path=path)
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return Config(
        keys=_keys(data.get("keys", {}), path),
        ladder=_ladder(data.get("ladder", {}), path),
        bell=bool(data.get("ui", {}).get("bell", True)),
        path=path,
    )


def _keys(section: Any, path: Path) -> dict[str, str]:
    if not isinstance(section, dict) or not all(isinstance(v, str) for v in section.values()):
        raise ConfigError(f'{path}: [keys] maps binding ids to key names, e.g. approve = "A"')
    return {str(k): v for k, v in section.items()}


def _ladder(section: Any, path: Path) -> LadderConfig:
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [ladder] must be a table")
    known = LadderConfig.__dataclass_fields__
    unknown = sorted(set(section) - set(known))
    if unknown:
        raise ConfigError(f"{path}: [ladder] has unknown keys {unknown}; known: {sorted(known)}")
    try:
        config = LadderConfig(**section)
        config.timeout, config.seeds, config.judges = float(config.timeout), int(config.seeds), int(config.judges)
        config.debounce = float(config.debounce)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: [ladder]: {exc}") from None
    return config
