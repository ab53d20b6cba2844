"""compute-sanitizer over a version's kernels: what is wrong only on a GPU and may still give the right answer.

A read past an allocation that happens to hold the answer, a race between threads on shared memory, a read of
memory never written, a barrier some threads never reach: each can pass correctness. For each of memcheck,
racecheck (shared memory), initcheck and synccheck a fresh worker runs under the tool, inside the same sandbox,
and calls the version once on each correctness case. The tool writes its log into a judge-owned folder the
confined version cannot write; the judge reads the findings from it (kernel, tool, address space, source line
where the kernel has line info, as Triton's do). torch's caching allocator is off in those workers: inside one
of its large blocks a read past a tensor is no error to memcheck.

A finding fails the version. A tool that is missing, that the GPU refuses, or under which the version could not
run, is a note: what was not checked is said, never taken as a pass or a failure. Sanitizers find honest bugs;
a version that tells it runs under one can behave there, so this is no check against cheating.
"""

from __future__ import annotations

import re
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from harness.contract.messages import CallRequest, Failure
from harness.judge.cuda_tools import cuda_tool, newest_first
from harness.problem.load import case_label
from harness.wire import frames as wire
from harness.wire import scratch as scratch_mod
from harness.workers.process import WorkerFailure, Wrapper

if TYPE_CHECKING:
    from harness.judge.context import JudgeContext, VersionRun

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
TOOL_ARGS: dict[str, tuple[str, ...]] = {
    "racecheck": ("--racecheck-report", "analysis"),
    # the kernels' own reads: a cudaMemcpy of bytes torch or Triton left unwritten (padding, a workspace) is
    # theirs, and was reported for an honest Triton matmul on an H100
    "initcheck": ("--check-api-memory-access", "no"),
}
MAX_LOG_BYTES = 4 << 20
MAX_FINDINGS = 20
EXCERPT_CHARS = 3000
PRINT_LIMIT = 100  # errors the tool prints per run: enough to group, not a log of millions
PREFIX = "========="
NOISE = (
    "COMPUTE-SANITIZER", "ERROR SUMMARY", "LEAK SUMMARY", "RACECHECK SUMMARY", "Target application returned",
    "Error: process didn't terminate", "Saved host backtrace", "Program hit", "Note:",
)  # fmt: skip
REFUSED = ("not supported", "Unable to", "Internal Sanitizer Error", "Could not", "Failed to")
# "at kernel(int *)+0x70 in file.cu:9" (CUDA 12) or "at 0x70 in file.cu:9:kernel(int *)" (older tools)
_AT = re.compile(
    r"\bat (?:(?P<kernel>[^\s].*?)\+0x[0-9a-f]+(?: in (?P<where>\S+:\d+))?"
    r"|0x[0-9a-f]+ in (?P<where_old>\S+?:\d+):(?P<kernel_old>.+?))(?: \[\d+ hazards?\])?$"
)
_SPACE = re.compile(r"__(global|shared|local)__")
# memcheck, initcheck and synccheck end with ERROR SUMMARY; racecheck (2025) with its own summary alone
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error|RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?")


def sanitizer_path() -> str | None:
    """KERNELTUI_SANITIZER (a path, or "none" to turn this off), else compute-sanitizer on PATH or in CUDA's
    usual places."""
    installed = [
        Path("/usr/local/cuda/bin/compute-sanitizer"),
        *newest_first("/usr/local/cuda-*/bin/compute-sanitizer"),
    ]
    return cuda_tool("KERNELTUI_SANITIZER", "compute-sanitizer", installed)


def wrapper(path: str, tool: str) -> Wrapper:
    real = Path(path).resolve()
    argv = (
        str(real), "--tool", tool, "--target-processes", "all", "--log-file", "{out}/sanitizer.txt",
        "--print-limit", str(PRINT_LIMIT), "--report-api-errors", "no", "--show-backtrace", "device",
        *TOOL_ARGS.get(tool, ()),
    )  # fmt: skip
    reads = {str(real.parent), str(real.parent.parent)}  # bin/ may hold only a link to ../compute-sanitizer/
    return Wrapper(argv=argv, reads=tuple(sorted(reads)), env=(("PYTORCH_NO_CUDA_MEMORY_CACHING", "1"),))


@dataclass
class Finding:
    tool: str
    what: str  # the tool's own words: "Invalid __global__ write of size 4 bytes"
    kernel: str | None
    where: str | None  # file:line where the kernel has line info
    space: str | None  # global, shared, local
    count: int = 1

    def words(self) -> str:
        place = f" in {self.kernel}" if self.kernel else ""
        place += f" at {self.where}" if self.where else ""
        space = f", {self.space} memory" if self.space and self.space not in self.what else ""
        times = f" (×{self.count})" if self.count > 1 else ""
        return f"{self.tool}: {self.what}{place}{space}{times}"


@dataclass
class ToolRun:
    tool: str
    errors: int | None = None  # the tool's own summary; None: it did not finish
    findings: list[Finding] = field(default_factory=list)
    note: str | None = None  # what kept the tool from checking everything
    seconds: float = 0.0
    excerpt: str | None = None  # the tool's report, where it found something or did not finish


@dataclass
class Sanitized:
    runs: list[ToolRun] = field(default_factory=list)
    note: str | None = None  # no tool at all

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.runs for f in r.findings]

    def failure(self) -> str | None:
        found = self.findings
        if not found:
            return None
        more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
        return "compute-sanitizer: " + "; ".join(f.words() for f in found[:3]) + more

    def to_json(self) -> dict[str, Any]:
        runs = {r.tool: {k: v for k, v in asdict(r).items() if k != "tool"} for r in self.runs}
        notes = [f"{r.tool}: {r.note}" for r in self.runs if r.note] + ([self.note] if self.note else [])
        return {"tools": runs, "findings": len(self.findings), "notes": notes}


def parse(tool: str, log: str) -> ToolRun:
    """A tool's log into findings grouped by what, kernel and line. Racecheck's warnings (hazards it rates as
    possibly benign) are kept apart from its errors and fail nothing."""
    run = ToolRun(tool)
    blocks = _blocks(log)
    grouped: dict[tuple[str, str | None, str | None], Finding] = {}
    for header, details in blocks:
        if header.startswith(NOISE) or _tools_own(header):
            continue
        at = next((m for m in map(_AT.search, [header, *details]) if m), None)
        what = _AT.sub("", header).strip().rstrip(".:") or header
        also = next((d for d in details if re.match(r"and \w+ access", d)), None)  # racecheck's other access
        what += f" {_AT.sub('', also).strip()}" if also else ""
        kernel = (at.group("kernel") or at.group("kernel_old")) if at else None
        line = (at.group("where") or at.group("where_old")) if at else None
        where = _short(line) if line else None
        space = "shared" if tool == "racecheck" else (m.group(1) if (m := _SPACE.search(header)) else None)
        key = (what, kernel, where)
        if key in grouped:
            grouped[key].count += 1
        elif len(grouped) < MAX_FINDINGS:
            grouped[key] = Finding(tool, what[:200], kernel, where, space)
    run.findings = list(grouped.values())
    if run.findings:
        run.excerpt = "\n".join(line for line in log.splitlines() if line.startswith(PREFIX))[:EXCERPT_CHARS]
    summary = _SUMMARY.search(log)
    run.errors = int(summary.group(1) or summary.group(2)) if summary else None
    if summary is None:
        refused = next((line for line in log.splitlines() if any(w in line for w in REFUSED)), None)
        tail = " ".join(log.strip().splitlines()[-3:])[-300:]
        run.note = f"it did not finish: {(refused or tail or 'no log')[:300]}"
        run.excerpt = log[-EXCERPT_CHARS:]
    return run


def _tools_own(header: str) -> bool:
    """The tool's own errors and racecheck's warnings: no finding about the version's kernels."""
    race = header.startswith(("Error: Race", "Warning: Race"))
    return header.startswith("Warning: Race") or (header.startswith(("Error", "Internal")) and not race)


def _blocks(log: str) -> list[tuple[str, list[str]]]:
    """The tool's report as (top line, its indented lines)."""
    blocks: list[tuple[str, list[str]]] = []
    for line in log.splitlines():
        if not line.startswith(PREFIX):
            continue
        body = line[len(PREFIX) :]
        if not body.strip():
            continue
        if body.startswith(" ") and not body.startswith("  ") and body.strip():
            blocks.append((body.strip(), []))
        elif blocks:
            blocks[-1][1].append(body.strip())
    return blocks


def _short(where: str) -> str:
    path, _, line = where.rpartition(":")
    return f"{Path(path).name}:{line}" if path and line.isdigit() else Path(where).name


def check(judge: JudgeContext, run: VersionRun, tools: tuple[str, ...] = TOOLS) -> Sanitized:
    """Each tool over one call of each correctness case, in workers of their own, run side by side."""
    path = sanitizer_path()
    if path is None:
        return Sanitized(note="compute-sanitizer not found: install the CUDA toolkit or set KERNELTUI_SANITIZER")
    calls = _calls(judge, run)
    for tool in tools:  # started together: their slow start under the tool overlaps
        run.workers[f"sanitize-{tool}"] = judge.pool.take_wrapped(wrapper(path, tool))
    with ThreadPoolExecutor(max_workers=len(tools), thread_name_prefix="kerneltui-sanitize") as pool:
        runs = list(pool.map(lambda tool: _run_tool(judge, run, tool, calls), tools))
    return Sanitized(runs=runs)


def _calls(judge: JudgeContext, run: VersionRun) -> list[tuple[str, Any, list[torch.Tensor]]]:
    """Each correctness case's inputs for a fresh seed, encoded once for every tool's worker."""
    calls = []
    for case in run.problem.cases:
        tensors: list[torch.Tensor] = []
        inputs = run.problem.inputs_for(case, secrets.randbelow(2**31), judge.device)
        calls.append((case_label(case), wire.encode_tree(list(inputs), tensors), tensors))
    return calls


def _run_tool(
    judge: JudgeContext, run: VersionRun, tool: str, calls: list[tuple[str, Any, list[torch.Tensor]]]
) -> ToolRun:
    worker = run.workers[f"sanitize-{tool}"]
    start = time.perf_counter()
    timeout = min(max(120.0, 10 * judge.options.timeout), 600.0)  # kernels run 10-100x slower under a tool
    trouble: str | None = None
    try:
        loaded = judge.load_into(worker, run)
        if isinstance(loaded, Failure):
            trouble = f"the version did not load under it: {loaded.err}"
        for label, tree, tensors in calls if trouble is None else ():
            reply, _ = worker.ask(CallRequest(tree), tensors, timeout, f"under compute-sanitizer {tool}")
            if isinstance(reply, Failure):
                trouble = f"case {label} failed under it: {reply.err[:200]}"
                break
        if not worker.ask_to_exit(60.0):
            trouble = trouble or "it did not finish writing its log in time"
            worker.kill()
    except WorkerFailure as exc:
        trouble = f"its worker: {str(exc).splitlines()[0][:200]}"
        worker.kill()
    try:
        log = scratch_mod.read_file(worker.out, "sanitizer.txt", MAX_LOG_BYTES).decode(errors="replace")
    except scratch_mod.Untrusted as exc:
        log = f"no log ({exc}); its worker's log: {worker.log_tail()[-300:]}"
    result = parse(tool, log)
    if trouble and not result.findings:  # with findings, they say why the call failed
        result.note = trouble if result.note is None else f"{trouble}; {result.note}"
    result.seconds = round(time.perf_counter() - start, 2)
    return result
