"""The judge's reading of what CUPTI saw over a version's timed calls (harness.worker.kernel_watch, in its worker):
the kernels timed must be the kernels recorded, and none of its process may run outside its own calls.

The report comes from the version's own process: parsed as untrusted JSON, sizes capped; a report that is
missing or says the profiler was stopped is a record tampered with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.contract.results import Flag

MAX_NAMES = 64


@dataclass
class TimedKernels:
    """What every timed call of one evaluation ran, against what its recorded calls ran."""

    differ: list[str] = field(default_factory=list)  # kernels timed are not the kernels recorded
    outside: list[str] = field(default_factory=list)  # a kernel of its process outside its own calls
    tampered: list[str] = field(default_factory=list)
    recorded: dict[str, dict[str, Any]] = field(default_factory=dict)  # bench case -> its recorded call's record

    def intruded(self, what: str) -> None:
        """NVML saw one of its stopped workers' processes computing on the GPU while `what` was timed."""
        self._note(self.outside, f"its stopped worker's process ran on the GPU while {what} was timed (NVML)")

    def add(self, seen: Any, where: str, recorded: Any, allows: Callable[[str], bool]) -> None:
        """One bench request's report; `recorded`: that request's recorded call (None in a race round: the
        benchmark's recorded call of the same case is the one compared); `allows`: the problem's allowed torch ops."""
        if isinstance(recorded, dict):
            self.recorded[where] = recorded
        if not isinstance(seen, dict):
            self._note(self.tampered, f"the timed calls' kernel record of {where} (the worker sent none)")
            return
        if "lost" in seen:
            self._note(self.tampered, str(seen["lost"])[:200])
        outside = seen.get("outside")
        if isinstance(outside, list) and outside:
            count = seen.get("outside_count")
            total = f" ({count} in all)" if isinstance(count, int) and count > len(outside) else ""
            self._note(self.outside, f"{where}: " + "; ".join(str(o)[:160] for o in outside[:3]) + total)
        kernels, ops = _counts(seen.get("kernels")), _counts(seen.get("ops"))
        calls = seen.get("timed_calls")
        if isinstance(calls, int) and calls > 0:
            differ = self._compare(kernels, calls, ops, self.recorded.get(where), allows)
            if differ:
                self._note(self.differ, f"{where}: {differ}")

    def _compare(
        self,
        kernels: dict[str, int],
        calls: int,
        ops: dict[str, int],
        recorded: dict[str, Any] | None,
        allows: Callable[[str], bool],
    ) -> str | None:
        profiled = recorded.get("profiled") if recorded else None
        if not isinstance(profiled, dict) or not isinstance(profiled.get("kernels"), dict):
            return None  # nothing recorded by CUPTI to compare with: the recorded call's own flags say why
        own = set(_counts(profiled["kernels"]))  # launched by no torch op: the DSLs'
        every = _counts(profiled.get("all_kernels")) or _counts(profiled["kernels"])
        had_ops = set(_counts(profiled.get("ops"))) | set(_counts(recorded.get("ops") if recorded else None))
        if own and not set(kernels) & own:
            return f"none of the recorded call's kernels ran in the timed calls ({', '.join(sorted(own)[:3])})"
        new = sorted(set(kernels) - set(every))
        if new:
            return f"the timed calls ran kernels the recorded call did not: {', '.join(n[:80] for n in new[:3])}"
        for name, count in kernels.items():  # fewer is fine: the recorded call may have autotuned
            if count > every.get(name, 0) * calls:
                return (
                    f"the timed calls launched {name[:80]} {count / calls:.3g} times a call, the recorded call "
                    f"{every.get(name, 0)}"
                )
        library = sorted(op for op in set(ops) - had_ops if not allows(op))
        if library:
            return f"torch computed in the timed calls what the recorded call did not: {', '.join(library[:3])}"
        return None

    @staticmethod
    def _note(into: list[str], text: str) -> None:
        if len(into) < 3 and text not in into:
            into.append(text)

    def flags(self) -> list[Flag]:
        """Its own flags; what it found tampered with goes with the recorder's (harness.judge.trust), one flag."""
        flags = []
        if self.differ:
            flags.append(Flag("timed-not-recorded", "; ".join(self.differ)))
        if self.outside:
            reason = "a kernel of its process ran outside its own timed calls: " + "; ".join(self.outside)
            flags.append(Flag("outside-call", reason))
        return flags


def _counts(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k)[:200]: v for k, v in list(value.items())[:MAX_NAMES] if isinstance(v, int) and v > 0}
