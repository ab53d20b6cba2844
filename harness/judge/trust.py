"""From what the workers recorded (harness.worker.recorder) to the flags a sceptical reviewer needs.

The records come from the version's own process, so they are parsed as untrusted JSON: wrong shapes are
dropped, sizes capped. Flags never fail a version; they say why its verdict should not be believed as
it stands, and keep it from being "best" until the person approves it.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

from harness.contract.results import ALLOCATED, HOST_AFTER_KERNEL, HOST_CODE, HOST_COPIED, INPUT, Flag
from harness.problem.load import Problem

MAX_LAUNCHES = 256
MAX_NOTES = 3


@dataclass
class Observed:
    """Everything the workers recorded while one version was judged."""

    ops: collections.Counter[str] = field(default_factory=collections.Counter)
    launches: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {"run": [], "compile": []})
    kernel_sources: dict[str, dict[str, str]] = field(default_factory=dict)
    not_from_kernel: list[str] = field(default_factory=list)
    tampered: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)  # what the judge would not take from a worker's scratch folder
    calls: int = 0
    profiled_ops: collections.Counter[str] = field(default_factory=collections.Counter)  # harness.worker.profiled
    cuda_kernels: collections.Counter[str] = field(default_factory=collections.Counter)  # launched by no torch op
    pending: int = 0  # calls whose profile is in a shared session not yet collected (add_shared_profiles)

    def add_sources(self, mode: str, kernels: Any) -> None:
        if isinstance(kernels, dict):
            self.kernel_sources[mode] = {str(k): str(v) for k, v in list(kernels.items())[:MAX_LAUNCHES]}

    def add(self, recorded: Any, mode: str, where: str, profiled: bool = False) -> None:
        """One recorded call's report: {"launches", "ops", "origins", "tampered", "profiled"}. `profiled`: the
        worker said, before the version was loaded, that it records its calls under torch's profiler too."""
        if not isinstance(recorded, dict):
            if mode == "run":
                self.tampered.add("the call's record (the worker sent none)")
            return
        self.calls += mode == "run"
        ops = recorded.get("ops")
        if isinstance(ops, dict):
            for name, count in list(ops.items())[:MAX_LAUNCHES]:
                if isinstance(count, int) and count > 0:
                    self.ops[str(name)] += count
        launches = recorded.get("launches")
        if isinstance(launches, list):
            known = self.launches.setdefault(mode, [])
            for launch in launches[:MAX_LAUNCHES]:
                if isinstance(launch, dict) and launch not in known and len(known) < MAX_LAUNCHES:
                    known.append(launch)
        tampered = recorded.get("tampered")
        if isinstance(tampered, list):
            self.tampered |= {str(t) for t in tampered[:MAX_NOTES]}
        origins = recorded.get("origins")
        if mode == "run" and isinstance(origins, list):
            self._check_origins(origins, where)
        if mode == "run" and "profiled" in recorded:
            self._add_profiled(recorded["profiled"])
        elif mode == "run" and profiled:  # the worker's code always sends it: the version took it out
            self.tampered.add("torch's profiler (the call's record came back without its part)")

    def add_shared_profiles(self, records: Any, lost_with_worker: bool = False) -> None:
        """The profiles of the calls that shared one profiler session (whose own records said "pending"), in
        call order, as the worker collected them; `lost_with_worker`: none, its process died before they were."""
        pending, self.pending = self.pending, 0
        if lost_with_worker:
            return
        got = records if isinstance(records, list) else []
        for record in got[:pending]:
            self._add_profiled(record, pending_allowed=False)
        if len(got) != pending:
            self.tampered.add(f"torch's profiler (it gave back {len(got)} records of {pending} shared calls)")

    def _add_profiled(self, profiled: Any, pending_allowed: bool = True) -> None:
        if not isinstance(profiled, dict):
            self.tampered.add("torch's profiler (its record came back malformed)")
            return
        if pending_allowed and set(profiled) == {"pending"}:
            self.pending += 1  # its profile comes with add_shared_profiles
            return
        if "lost" in profiled:
            self.tampered.add(str(profiled["lost"])[:200])
        for name, into in (("ops", self.profiled_ops), ("kernels", self.cuda_kernels)):
            counts = profiled.get(name)
            if isinstance(counts, dict):
                for key, count in list(counts.items())[:MAX_LAUNCHES]:
                    if isinstance(count, int) and count > 0:
                        into[str(key)] += count

    def _check_origins(self, origins: list[Any], where: str) -> None:
        for index, writers in enumerate(origins):
            if not isinstance(writers, list) or not writers:
                continue  # an empty output: nothing to write
            names = [str(w) for w in writers]
            if any(n.startswith("kernel:") for n in names) or len(self.not_from_kernel) >= MAX_NOTES:
                continue
            label = "the output" if len(origins) == 1 else f"output {index}"
            self.not_from_kernel.append(f"{label} of {where} {describe_writers(names)}")

    def flags(self, problem: Problem, dumped: set[str] | None) -> list[Flag]:
        """The flags this record earns. `dumped`: names of the kernels shown (None when there were no dumps)."""
        flags: list[Flag] = []
        uses = self._uses_library(problem)
        if uses:
            flags.append(Flag("uses-library", uses))
        ran = [launch for launch in self.launches.get("run", []) if launch.get("name")]
        if self.calls and not ran:
            flags.append(Flag("no-kernel", "launches no Triton, CuTeDSL or TileLang kernel of its own"))
        elif self.not_from_kernel:
            flags.append(Flag("no-kernel", "; ".join(self.not_from_kernel)))
        mismatch = self._mismatch(ran, dumped)
        if mismatch:
            flags.append(Flag("kernel-mismatch", mismatch))
        said = ["the version replaced what records its work: " + ", ".join(sorted(self.tampered))] * bool(self.tampered)
        said += ["the judge refused what its worker left: " + "; ".join(sorted(self.refused))] * bool(self.refused)
        if said:
            flags.append(Flag("tampered", "; ".join(said)))
        return flags

    def _uses_library(self, problem: Problem) -> str | None:
        """Torch ops computing under test, as the dispatch mode and the profiler saw them (the profiler sees
        the ops a version ran with the dispatch mode set aside)."""
        ops = self.ops | self.profiled_ops  # the larger count of each
        used = {op: n for op, n in ops.items() if not problem.allows(op)}
        if not used:
            return None
        top = ", ".join(f"{op} ×{n}" for op, n in sorted(used.items(), key=lambda kv: -kv[1])[:5])
        text = f"torch computes under test what the kernels should: {top}"
        hidden = sorted(op for op in used if self.profiled_ops[op] > self.ops[op])
        if hidden:
            text += (
                f" ({', '.join(hidden[:3])} out of the op recorder's sight, seen by torch's profiler alone: run by"
                " compiled code such as torch.compile's, or with the recorder set aside)"
            )
        return text

    def _mismatch(self, ran: list[dict[str, Any]], dumped: set[str] | None) -> str | None:
        """Kernels run under test that are not what was compiled (and what the Asm pane shows)."""
        compiled = self.launches.get("compile", [])
        sources = self.kernel_sources
        if "compile" in sources and "run" in sources and sources["compile"] != sources["run"]:
            differ = sorted(set(sources["compile"].items()) ^ set(sources["run"].items()))
            return f"its kernels differ between the compiling and the running process: {differ[0][0]}"
        if compiled:
            for launch in ran:
                if launch.get("dsl") == "triton" and not any(_same_kernel(launch, c) for c in compiled):
                    text = f"{_launch_text(launch)} ran under test but was never compiled for the GPU, so not shown"
                    return text + _globals_differ(launch, compiled)
        stranger = self._stranger_kernel(ran, dumped)
        if stranger:
            return stranger
        if dumped is not None:
            for launch in ran:
                if launch.get("dsl") == "triton" and str(launch.get("name")) not in dumped:
                    return f"{_launch_text(launch)} ran under test but is not among the dumped kernels"
        return None

    def _stranger_kernel(self, ran: list[dict[str, Any]], dumped: set[str] | None) -> str | None:
        """A CUDA kernel that ran under test, launched by no torch op and none of the version's own."""
        launched = ran + self.launches.get("compile", [])
        own = {str(launch.get("name")) for launch in launched}
        for launch in launched:
            if launch.get("dsl") in ("cutedsl", "tilelang"):  # CUDA names are its compiler's: listed, and dumped
                own |= _cuda_symbols(launch)
                own |= dumped or set()
        for name, count in self.cuda_kernels.most_common():
            if not any(mine and (mine == name or mine in name) for mine in own):
                return (
                    f"CUDA kernel {name} ran under test ×{count}, launched by no torch op and none of its own "
                    "kernels (a library called past torch, or a kernel built at run time)"
                )
        return None


def _cuda_symbols(launch: dict[str, Any]) -> set[str]:
    """The CUDA names a CuTeDSL or TileLang launch listed, only those its compiler would give (CuTeDSL's
    `kernel_...`, TileLang's `<its function>_kernel`), so a library's kernel can't be passed off as the version's."""
    symbols = launch.get("kernels")
    if not isinstance(symbols, list):
        return set()
    prefix = "kernel_" if launch.get("dsl") == "cutedsl" else f"{launch.get('name')}_kernel"
    return {str(s) for s in symbols if str(s).startswith(prefix)}


SPECIALISATION = ("name", "source", "constexprs", "num_warps", "num_stages", "num_ctas")


def _same_kernel(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The same specialisation: the globals its code reads (harness.worker.recorder.launched_globals) included."""
    return all(a.get(k) == b.get(k) for k in (*SPECIALISATION, "globals"))


def _globals_differ(launch: dict[str, Any], compiled: list[dict[str, Any]]) -> str:
    """Which values its code reads (its globals, its helpers' defaults) differ from a compiled launch's, where the
    launch is a compiled one in all but those: '...: a value its code reads differs ... (ADD=True under test, ...)'."""
    for other in compiled:
        if all(launch.get(k) == other.get(k) for k in SPECIALISATION):
            ran, built = launch.get("globals"), other.get("globals")
            ran, built = ran if isinstance(ran, dict) else {}, built if isinstance(built, dict) else {}
            differ = sorted(k for k in set(ran) | set(built) if ran.get(k, "unset") != built.get(k, "unset"))
            said = [f"{k}={ran.get(k, 'unset')} under test, {k}={built.get(k, 'unset')} compiled" for k in differ[:3]]
            return f": a value its code reads differs from the compiled one's ({'; '.join(said)})"
    return ""


def _launch_text(launch: dict[str, Any]) -> str:
    raw = launch.get("constexprs")
    constexprs: dict[str, Any] = raw if isinstance(raw, dict) else {}
    settings = [f"{k}={v}" for k, v in list(constexprs.items())[:4]]
    settings += [f"{k} {launch[k]}" for k in ("num_warps", "num_stages") if k in launch]
    return f"kernel {launch.get('name')} ({', '.join(settings) or 'defaults'})"


def describe_writers(writers: list[str]) -> str:
    """'was computed by aten::_softmax', 'is an input', 'was never written', 'came from host code'."""
    ops = [w for w in writers if w.startswith("aten::")]
    parts = []
    if ops:
        parts.append(f"was computed by {', '.join(ops[:3])}")
    if INPUT in writers:
        parts.append("is (a copy of) an input")
    if HOST_CODE in writers:
        parts.append("came from host code (numpy, a raw pointer: memory no torch op or kernel wrote)")
    if HOST_AFTER_KERNEL in writers:
        parts.append("was changed after its kernel ran, by host code (numpy, a raw pointer) no hook sees")
    for copier in sorted(w.removeprefix(HOST_COPIED) for w in writers if w.startswith(HOST_COPIED))[:2]:
        parts.append(
            f"was copied by {copier} from a buffer filled by host code (numpy, a Python list, torch.tensor of host "
            "data) or by work between calls: the answer was not computed by the call's kernels"
        )
    if ALLOCATED in writers and not parts:
        parts.append("was never written by a kernel (only allocated or filled with a constant)")
    return ", ".join(parts) + ", not by a kernel of the version"
