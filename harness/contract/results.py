"""Results that cross process boundaries: one rung's outcome and a whole evaluation, as plain JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# Who wrote an output's storage, as the worker's recorder reports it and the judge describes it (besides
# "kernel:<name>" and "aten::<op>")
ALLOCATED = "allocated"
INPUT = "input"
HOST_CODE = "host code"  # a buffer no op or kernel made under the recorder: numpy's, a pointer's
HOST_AFTER_KERNEL = "host code after its kernel"  # on the CPU: bytes changed since its kernel left them
HOST_COPIED = "host code, copied by "  # + "kernel <name>": a kernel only copied what host code computed (CPU)

# The built-in rungs (harness.judge.rungs.builtin), in the order they climb; a problem's own rungs follow correctness.
RUNG_ORDER = (
    "load",
    "compile",
    "correctness",
    "benchmark",
    "roofline",
    "dumps",
    "sanitize",
    "profile",
)  # the last two: when asked
DEFAULT_RUNGS = ("load", "compile", "correctness", "benchmark", "roofline", "dumps")
PROFILE_RUNGS = ("load", "compile", "correctness", "profile")  # a profile: checked first, then Nsight Compute
SANITIZE_RUNGS = (*DEFAULT_RUNGS, "sanitize")  # the version judged again, compute-sanitizer's tools too
# What a person or an agent may ask of a version: a profile (recorded beside its evaluation) or a sanitize
AskedKind = Literal["profile", "sanitize"]


@dataclass
class RungResult:
    """One rung: ok is True (passed), False (failed) or None (skipped, with `skipped` saying why)."""

    name: str
    ok: bool | None = None
    err: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    skipped: str | None = None
    log: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RungResult:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    @classmethod
    def skip(cls, name: str, reason: str) -> RungResult:
        return cls(name=name, ok=None, skipped=reason)


@dataclass
class Flag:
    """Something a sceptical reviewer must know before trusting a passing version (it never fails one by
    itself, but a flagged version is not "best" until the person approves it)."""

    name: str  # uses-library, no-kernel, kernel-mismatch, escaped-process, timing-mismatch, unconfirmed...
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> Flag:
        if isinstance(data, dict):
            return cls(name=str(data.get("name", "?")), reason=str(data.get("reason", "")))
        return cls(name=str(data), reason="")


@dataclass
class Evaluation:
    """A version judged by the ladder. `ok` means no rung failed; `status` says how far it got."""

    problem: str
    version: str
    path: str
    hash: str
    ok: bool = False
    status: str = "running"  # pass | fail | unverified | error | running
    device: dict[str, Any] = field(default_factory=dict)
    rungs: list[RungResult] = field(default_factory=list)
    started: str = ""
    seconds: float = 0.0
    problem_hash: str = ""
    seeds: list[int] = field(default_factory=list)
    sandbox: str = ""
    error: str | None = None
    flags: list[Flag] = field(default_factory=list)

    @property
    def failed_rung(self) -> str | None:
        return next((r.name for r in self.rungs if r.ok is False), None)

    def rung(self, name: str) -> RungResult | None:
        return next((r for r in self.rungs if r.name == name), None)

    def finish(self) -> None:
        """Sets ok and status from the rungs."""
        self.ok = self.error is None and all(r.ok is not False for r in self.rungs)
        correctness = self.rung("correctness")
        if not self.ok:
            self.status = "error" if self.error and self.failed_rung is None else "fail"
        elif correctness is not None and correctness.ok:
            self.status = "pass"
        else:
            self.status = "unverified"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["failed_rung"] = self.failed_rung
        return data

    def dumps(self) -> str:
        return json.dumps(self.to_json(), default=str)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Evaluation:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data and k not in ("rungs", "flags")}
        ev = cls(**known)
        ev.rungs = [RungResult.from_json(r) for r in data.get("rungs", [])]
        ev.flags = [Flag.from_json(f) for f in data.get("flags", []) or []]
        return ev
