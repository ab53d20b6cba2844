"""How a ladder run is configured: one model for `python -m harness`, its `serve` requests, `kerneltui eval`,
the config file's [ladder] table and the scheduler's judges (kept free of torch so the CLI starts fast).

Each option has one key (the config file's and a serve request's name), one command-line flag made from
it, one default and one parser: a value from a flag, a TOML table or a JSON request goes through the same
code, so the layers cannot drift apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contract.results import DEFAULT_RUNGS, RUNG_ORDER
from harness.contract.source import MAX_VERSION_KB

# Options a config file may not set: where this run writes, and the best to beat, belong to a run.
PER_RUN = ("state_dir", "best_us", "race_with")


def parse_rungs(value: Any) -> tuple[str, ...]:
    """A comma-separated text or a list of rung names, in ladder order; empty means the default rungs."""
    items = value.split(",") if isinstance(value, str) else list(value or ())
    wanted = [str(r).strip() for r in items if str(r).strip()]
    if not wanted:
        return DEFAULT_RUNGS
    unknown = [r for r in wanted if r not in RUNG_ORDER]
    if unknown:
        raise ValueError(f"unknown rung(s) {', '.join(unknown)}; rungs are {', '.join(RUNG_ORDER)}")
    return tuple(r for r in RUNG_ORDER if r in wanted)


def parse_best(value: Any) -> float | dict[str, float] | None:
    """The best median so far: µs, or {device name: µs}; as JSON text from a flag."""
    if value is None or isinstance(value, dict):
        return None if value is None else {str(k): float(v) for k, v in value.items()}
    if isinstance(value, str) and value.strip().startswith("{"):
        return parse_best(json.loads(value))
    return float(value)


def parse_race(value: Any) -> dict[str, dict[str, str]] | None:
    """The best version to race, by device name: {device: {"path", "hash", "version"}}; as JSON text from a flag."""
    if value is None:
        return None
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise ValueError("expected {device name: {path, hash, version}}")
    races: dict[str, dict[str, str]] = {}
    for device, target in value.items():
        if not isinstance(target, dict) or not all(isinstance(target.get(k), str) for k in ("path", "hash")):
            raise ValueError(f"{device}: expected {{path, hash, version}}, not {target!r}")
        races[str(device)] = {k: str(target.get(k) or "") for k in ("path", "hash", "version")}
    return races


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off"):
        return False
    raise ValueError(f"expected true or false, not {value!r}")


def positive(kind: Callable[[Any], Any], zero: bool = False) -> Callable[[Any], Any]:
    """A parser of numbers above 0 (`zero`: 0 too, where 0 means off)."""

    def parse(value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"expected a number, not {value!r}")
        number = kind(value)
        if number < 0 or (number == 0 and not zero):
            raise ValueError(f"must be {'0 or ' * zero}above 0, not {value!r}")
        return number

    return parse


def optional_positive(value: Any) -> float | None:
    return None if value is None else positive(float)(value)


def option(key: str, help: str, parse: Callable[[Any], Any], flag: str | None = None) -> dict[str, Any]:
    """A field's metadata: its key, its flag (`--no-KEY` for a switch that is on by default), how to read it."""
    return {"key": key, "help": help, "parse": parse, "flag": flag or "--" + key.replace("_", "-")}


@dataclass
class Options:
    rungs: tuple[str, ...] = field(
        default=DEFAULT_RUNGS,
        metadata=option("rungs", f"comma-separated subset of {','.join(RUNG_ORDER)}", parse_rungs),
    )
    timeout: float = field(
        default=60.0, metadata=option("timeout", "seconds per call into the version", positive(float))
    )
    arch: str = field(default="sm_90", metadata=option("arch", "compile target with no GPU", str))
    seeds_per_case: int = field(default=2, metadata=option("seeds", "seeds per correctness case", positive(int)))
    bench_budget_s: float = field(
        default=1.0, metadata=option("bench_budget_s", "seconds of timed calls per bench case", positive(float))
    )
    state_dir: Path | None = field(
        default=None,
        metadata=option("state_dir", "where dumps and device peaks go (default <workspace>/.kerneltui)", Path),
    )
    confine: bool = field(
        default=True,
        metadata=option(
            "sandbox", "run workers unconfined (no bubblewrap, Landlock or seccomp)", parse_bool, "--no-sandbox"
        ),
    )
    fork: bool = field(
        default=True,
        metadata=option(
            "fork",
            "start every worker afresh (seconds: torch and Triton imported again) instead of forking it from a "
            "template process that imported them once",
            parse_bool,
            "--no-fork",
        ),
    )
    max_file_mb: float = field(
        default=512.0,
        metadata=option(
            "max_file_mb", "largest file the kernel's process may write, its output included", positive(float)
        ),
    )
    max_memory_mb: float | None = field(
        default=None,
        metadata=option(
            "max_memory_mb", "memory for the kernel's processes (default half the machine's)", optional_positive
        ),
    )
    confirm: bool = field(
        default=True,
        metadata=option("confirm", "do not judge a new best again in a fresh worker", parse_bool, "--no-confirm"),
    )
    sanitize_best: bool = field(
        default=True,
        metadata=option(
            "sanitize_best",
            "do not run compute-sanitizer's tools over a new best before it becomes the best",
            parse_bool,
            "--no-sanitize-best",
        ),
    )
    best_us: float | dict[str, float] | None = field(
        default=None,
        metadata=option(
            "best_us",
            "the best median so far in µs, or a JSON object of them by device name: a version is judged again in a "
            "fresh worker before it can beat it (default: every passing version is)",
            parse_best,
        ),
    )
    race_with: dict[str, dict[str, str]] | None = field(
        default=None,
        metadata=option(
            "race_with",
            "the best version by device name, as a JSON object {device: {path, hash, version}}: a passing version is "
            "timed against it back to back (new, best, best, new) and labelled faster, slower, same or ambiguous",
            parse_race,
        ),
    )
    spare_idle_s: float = field(
        default=120.0,
        metadata=option(
            "spare_idle_s",
            "seconds without a request before the judge ends its spare workers and the templates they are forked "
            "from (~300 MB each; the next version then waits seconds for a template to start); 0 keeps them",
            positive(float, zero=True),
        ),
    )
    max_kernels: int = field(
        default=64,
        metadata=option("max_kernels", "compiled kernels collected per version; more flags it tampered", positive(int)),
    )
    max_dump_file_mb: float = field(
        default=16.0,
        metadata=option(
            "max_dump_file_mb",
            "largest compiled file (cubin, PTX, IR) taken from a worker; larger flags it",
            positive(float),
        ),
    )
    max_dumps_mb: float = field(
        default=128.0,
        metadata=option("max_dumps_mb", "compiled files and listings kept per version", positive(float)),
    )
    dumps_budget_mb: float = field(
        default=2048.0,
        metadata=option(
            "dumps_budget_mb",
            "dumps kept per workspace: past it, old unapproved versions' dumps are pruned first (kerneltui gc)",
            positive(float),
        ),
    )
    max_version_kb: float = field(
        default=MAX_VERSION_KB, metadata=option("max_version_kb", "a larger version file is refused", positive(float))
    )

    def best_for(self, device_name: str) -> float | None:
        """The median to beat on this device; None: no best yet, so a passing version is confirmed."""
        if isinstance(self.best_us, dict):
            return self.best_us.get(device_name)
        return self.best_us

    def race_for(self, device_name: str) -> dict[str, str] | None:
        return (self.race_with or {}).get(device_name)

    @property
    def max_version_bytes(self) -> int:
        return int(self.max_version_kb * 1024)

    def updated(self, values: Mapping[str, Any], where: str = "") -> Options:
        """A copy with `values` (by key) applied, each read by its option's parser; ValueError names the key."""
        fields = by_key()
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ValueError(f"{where}{': ' * bool(where)}unknown option(s) {unknown}; known: {sorted(fields)}")
        changes = {}
        for key, value in values.items():
            spec = fields[key]
            try:
                changes[spec.name] = spec.metadata["parse"](value)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}{': ' * bool(where)}{key}: {exc}") from None
        return dataclasses.replace(self, **changes)

    def to_argv(self) -> list[str]:
        """The flags that give a judge's command line these options (defaults left out)."""
        argv: list[str] = []
        for spec in dataclasses.fields(self):
            value, meta = getattr(self, spec.name), spec.metadata
            if value == spec.default:
                continue
            if isinstance(value, bool):
                argv.append(meta["flag"])  # only the on-by-default switches have flags: --no-KEY
            elif isinstance(value, tuple):
                argv += [meta["flag"], ",".join(value)]
            elif isinstance(value, dict):
                argv += [meta["flag"], json.dumps(value)]
            elif value is not None:
                argv += [meta["flag"], f"{value:g}" if isinstance(value, float) else str(value)]
        return argv


def by_key() -> dict[str, dataclasses.Field[Any]]:
    return {f.metadata["key"]: f for f in dataclasses.fields(Options)}


def add_arguments(parser: argparse.ArgumentParser, leave_out: tuple[str, ...] = ()) -> None:
    """Every option (but `leave_out`) as a flag; a flag not given stays None, so it overrides nothing."""
    defaults = Options()
    for key, spec in by_key().items():
        if key in leave_out:
            continue
        meta = spec.metadata
        if spec.type in ("bool", bool):
            parser.add_argument(meta["flag"], dest=key, action="store_const", const=False, help=meta["help"])
            continue
        default = getattr(defaults, spec.name)
        shown = ",".join(default) if isinstance(default, tuple) else default
        suffix = f" (default {shown})" if shown is not None else ""
        parser.add_argument(meta["flag"], dest=key, help=meta["help"] + suffix)


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The options a command line set, by key."""
    return {key: getattr(args, key) for key in by_key() if getattr(args, key, None) is not None}


def config_values(table: Mapping[str, Any]) -> dict[str, Any]:
    """The options of a config file's [ladder] table (its other keys are the caller's)."""
    return {k: v for k, v in table.items() if k in by_key() and k not in PER_RUN}
