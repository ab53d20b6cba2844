"""The tools an agent works with, by the names every backend uses, so transcripts compare.

write_version, wait_for_verdict, read_results, read_file, search_context, read_dump, profile, sanitize. Paths resolve
inside the workspace and the context folder only (symlinks included); outputs are cut to a size a model can
use, with a note saying what was left out and how to ask for it.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import regex
from pydantic import BaseModel, Field

from agents.base import Host, Judged, ProblemInfo
from agents.context_index import ContextIndex, IndexUnavailable, format_hits, index_file
from harness.contract.source import MAX_VERSION_KB

MAX_OUTPUT_CHARS = 16_000
MAX_FILE_BYTES = 4_000_000
SEARCH_HITS = 40
INDEX_HITS = 12
INDEX_REFRESH_S = 60.0  # a session looks for changed context files at most this often
DUMP_WINDOW_LINES = 200
GREP_BUDGET_S = 2.0  # an agent's grep pattern over one text, at most
TEXT_SUFFIXES = {".py", ".md", ".txt", ".rst", ".ptx", ".sass", ".ttir", ".ttgir", ".llir", ".ll", ".mlir", ".cu"}
TEXT_SUFFIXES |= {".cuh", ".h", ".hpp", ".cpp", ".c", ".toml", ".json", ".yml", ".yaml", ".cfg", ".ini", ".sh"}
SKIP_DIRS = {".git", "__pycache__", ".kerneltui", "node_modules", ".venv"}

DumpKind = Literal["sass", "ptx", "ttgir", "ttir", "llir", "cu", "tir", "tl"]  # the last three: TileLang's
VERSION = "a version's name, e.g. 'v003'"
OFFSET = "the line to start at (1-based)"


class WriteVersionArgs(BaseModel):
    code: str = Field(description="the whole module, defining custom_kernel(*inputs)")
    notes: str = Field(description="what changed and why, one or two sentences")


class ReadResultsArgs(BaseModel):
    version: str = Field(description=VERSION)


class ReadFileArgs(BaseModel):
    path: str = Field(description="relative to the workspace or the context folder, or absolute, or a site/ path")
    offset: int = Field(1, ge=1, description=OFFSET)


class SearchContextArgs(BaseModel):
    query: str = Field(description="words to look for")


class ProfileArgs(BaseModel):
    version: str = Field(description=VERSION)


class ReadDumpArgs(BaseModel):
    version: str = Field(description=VERSION)
    kind: DumpKind = Field(description="which listing")
    kernel: str | None = Field(None, description="a kernel's name (default: the first)")
    grep: str | None = Field(None, description="a regular expression; matches come with context")
    offset: int = Field(1, ge=1, description=OFFSET)


@dataclass(frozen=True)
class ToolSpec:
    """One tool, defined once: the Claude backend's schema and the MCP server's tool are made from it."""

    name: str
    description: str
    args: type[BaseModel]
    read_only: bool = True

    def input_schema(self) -> dict[str, Any]:
        schema = self.args.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return schema


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "write_version",
        "Write the next version of the kernel (the next vNNN.py in the problem folder), wait for the "
        "verification ladder to judge it, and return the result rung by rung: load, compile, "
        "correctness against the reference, benchmark, roofline, dumps. The code is a whole Python "
        "module defining custom_kernel(*inputs) that returns the output(s).",
        WriteVersionArgs,
        read_only=False,
    ),
    ToolSpec(
        "wait_for_verdict",
        "Wait for the verdict on a version that write_version left still being judged (status 'judging'), "
        "for as long as write_version waits; returns the verdict rung by rung, or 'judging' again.",
        ReadResultsArgs,
    ),
    ToolSpec("read_results", "The ladder's latest result for a version (e.g. 'v003'), rung by rung.", ReadResultsArgs),
    ToolSpec(
        "read_file",
        "Read a text file in the workspace or the context folder: a path relative to the workspace "
        "(e.g. 'softmax/problem.py'), to the context folder (e.g. 'context/ptx-notes.md'), or absolute; "
        "a site/<package>/... path search_context returned reads that installed package's file. "
        "Long files come in windows: pass offset (a line number) to read on.",
        ReadFileArgs,
    ),
    ToolSpec(
        "search_context",
        "Search the context folder (DSL docs, CUTLASS/CuTeDSL sources, PTX notes, and installed triton/cutlass "
        "sources under site/ when indexed) for words or identifiers (make_tiled_copy, tl.dot, wgmma); returns "
        "chunks (a def, a class, a doc section) as path:start-end with their matching lines as path:line: text, "
        "those holding most of the words first. read_file the path with offset=start to read one.",
        SearchContextArgs,
    ),
    ToolSpec(
        "read_dump",
        "A window of a version's compiled code: kind is sass, ptx, ttgir, ttir or llir (TileLang versions: "
        "also cu, its CUDA source, tir and tl); kernel picks a kernel by name (default: the first); grep is a "
        "regular expression, and the matching lines come with two lines around each; offset is a line number "
        "to start the window at.",
        ReadDumpArgs,
    ),
    ToolSpec(
        "profile",
        "Profile a version's kernels under Nsight Compute on the first bench case and wait for it (tens of "
        "seconds): per kernel its time, DRAM bytes and bandwidth, SM and memory throughput as % of peak, "
        "achieved and theoretical occupancy, registers, shared memory, block and grid; and, for a Triton "
        "version that marks regions in its kernel (import triton.profiler.language as pl; "
        "pl.enable_semantic('triton'); `with pl.scope('load'):` in the kernel), each region's cycles from "
        "proton. Needs a GPU with ncu; otherwise it says why not.",
        ProfileArgs,
    ),
    ToolSpec(
        "sanitize",
        "Judge a version again with compute-sanitizer's memcheck, racecheck (shared memory), initcheck and "
        "synccheck over one call of each correctness case, and wait for it (a minute or more): each finding with "
        "its kernel, tool, address space and source line. Finds what one correct call hides: reads past an "
        "allocation, races on shared memory, reads of memory never written. A finding fails the version. Needs a "
        "GPU with compute-sanitizer; otherwise it says why not.",
        ProfileArgs,
    ),
)
TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}
TOOL_SPECS: list[dict[str, Any]] = [
    {"name": t.name, "description": t.description, "input_schema": t.input_schema()} for t in TOOLS
]
TOOL_NAMES = tuple(TOOLS_BY_NAME)


class ToolError(Exception):
    """A tool refused or failed; the message goes back to the model as the tool's error."""


def cut(text: str, limit: int = MAX_OUTPUT_CHARS, hint: str = "") -> str:
    """At most `limit` characters, ending with a note of how much was left out."""
    if len(text) <= limit:
        return text
    kept = text[:limit]
    kept = kept[: kept.rfind("\n") + 1] or kept
    left = text[len(kept) :]
    note = f"[cut: {len(left):,} more characters ({left.count(chr(10)) + 1:,} lines) not shown"
    return f"{kept}{note}{'; ' + hint if hint else ''}]"


def confine(raw: str, roots: tuple[Path, ...], base: Path, private: tuple[Path, ...] = ()) -> Path:
    """The real path of `raw` (relative to `base`), if it lies inside one of `roots` and none of `private` (the
    state folder first, then other agents' folders); else ToolError."""
    if not raw or "\x00" in raw:
        raise ToolError("give a path")
    candidate = Path(os.path.expanduser(raw))
    if not candidate.is_absolute():
        candidate = base / candidate
    real = Path(os.path.realpath(candidate))
    real_roots = [Path(os.path.realpath(r)) for r in roots]
    if not any(real == r or r in real.parents for r in real_roots):
        allowed = " and ".join(str(r) for r in real_roots)
        raise ToolError(f"{raw} is outside the folders this agent may read ({allowed})")
    for number, folder in enumerate(private):
        hidden = Path(os.path.realpath(folder))
        if (real == hidden or hidden in real.parents) and number == 0:
            raise ToolError(
                f"{raw} is kerneltui's own state ({hidden}): agents read results and dumps through "
                "read_results and read_dump"
            )
        if real == hidden or hidden in real.parents:  # the rest: other agents' folders, in a bench
            raise ToolError(f"{raw} is another agent's work ({hidden.name}), closed to this one")
    return real


VERSION_NAME = re.compile(r"^v\d+\.py$")


def confine_write(raw: str, problem: ProblemInfo) -> Path:
    """Where an agent may write: its own problem's folder, a version (vNNN.py) at its top or anything in a
    sub-folder (the agent's scratch, never judged). The problem's own files (problem.py, what it imports or
    reads, anything else at the top of its folder) are the person's, and other problems' folders are not this
    agent's: ToolError saying so."""
    real = confine(raw, (problem.workspace,), problem.folder, problem.private)
    folder = Path(os.path.realpath(problem.folder))
    if real != folder and folder not in real.parents:
        raise ToolError(
            f"{raw}: agents write only inside their problem's folder ({problem.name}/): versions as vNNN.py, "
            "notes in a sub-folder"
        )
    if real.parent == folder and not VERSION_NAME.match(real.name):
        raise ToolError(
            f"{raw}: {real.name} is the problem's own file, the person's to change: agents write versions "
            f"(vNNN.py) and, in a sub-folder of {problem.name}/, notes of their own"
        )
    if real == folder or real.is_dir():
        raise ToolError(f"{raw} is a folder: give a file's path")
    return real


def check_arguments(tool: ToolSpec, args: dict[str, Any]) -> None:
    """ToolError naming what is wrong with the caller's arguments: unknown, missing, or of the wrong type."""
    fields = tool.args.model_fields
    unknown = [key for key in args if key not in fields]
    if unknown:
        raise ToolError(f"bad arguments for {tool.name}: got an unexpected keyword argument {unknown[0]!r}")
    missing = [key for key, spec in fields.items() if spec.is_required() and key not in args]
    if missing:
        raise ToolError(f"bad arguments for {tool.name}: missing a required argument: {missing[0]!r}")
    for key, value in args.items():
        kinds = typing.get_args(fields[key].annotation) or (fields[key].annotation,)
        if typing.get_origin(fields[key].annotation) is Literal:
            if value not in kinds:
                raise ToolError(f"bad arguments for {tool.name}: {key} must be one of {', '.join(map(str, kinds))}")
            continue
        expected = tuple(t for t in kinds if isinstance(t, type))
        if expected and value is not None and not isinstance(value, expected):
            wanted = " or ".join(t.__name__ for t in expected if t is not type(None))
            raise ToolError(f"bad arguments for {tool.name}: {key} must be {wanted}, not {type(value).__name__}")


@dataclass
class Toolbox:
    host: Host
    author: str
    written: list[Judged] = field(default_factory=list)  # every version this toolbox wrote, judged
    waited: Judged | None = None  # what the last wait_for_verdict found
    index_checked: float | None = None  # when this toolbox last brought the context index up to date

    def use(self, name: str, args: dict[str, Any], refusal: str | None = None) -> tuple[str, bool]:
        """call(), with the call and its result in the transcript; `refusal` answers instead of running it."""
        record_call(self.host, name, args)
        output, ok = (refusal, False) if refusal else self.call(name, args)
        judged = self.written[-1] if name == "write_version" and ok and self.written else None
        record_result(self.host, name, output, ok, judged)
        return output, ok

    def call(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
        """(output, ok): the text the model gets back, and whether the tool did what was asked."""
        try:
            tool = TOOLS_BY_NAME.get(name)
            if tool is None:
                raise ToolError(f"no tool {name!r}; tools are {', '.join(TOOL_NAMES)}")
            check_arguments(tool, args)
            return getattr(self, f"tool_{name}")(**args), True
        except ToolError as exc:
            return str(exc), False
        except TypeError as exc:  # past the argument check: a fault of ours, not the caller's
            return f"{name} failed inside kerneltui ({type(exc).__name__}: {exc}); your arguments were fine", False

    # --- the tools ---------------------------------------------------------------------------

    def tool_write_version(self, code: str, notes: str = "") -> str:
        if not isinstance(code, str) or not ("custom_kernel" in code or "ModelNew" in code):
            raise ToolError(
                "code must be a whole Python module that defines custom_kernel(*inputs) (or ModelNew, for a "
                "problem imported from KernelBench)"
            )
        if len(code.encode()) > MAX_VERSION_KB * 1024:
            raise ToolError(f"code is {len(code.encode()):,} bytes; a version may be {MAX_VERSION_KB:g} KiB at most")
        judged = self.host.write_version(code, notes if isinstance(notes, str) else "", self.author)
        self.written.append(judged)
        return cut(judged.summary)

    def tool_wait_for_verdict(self, version: str) -> str:
        judged = self.host.wait_verdict(str(version).strip())
        if judged is None:
            names = ", ".join(self.host.version_names()) or "none yet"
            raise ToolError(f"no version {version!r}; versions: {names}")
        self.waited = judged
        return cut(judged.summary)

    def tool_read_results(self, version: str) -> str:
        judged = self.host.results(str(version).strip())
        if judged is None:
            names = ", ".join(self.host.version_names()) or "none yet"
            raise ToolError(f"no results for {version!r}; versions: {names}")
        return cut(judged.summary)

    def tool_read_file(self, path: str, offset: int = 1) -> str:
        real = self._resolve(str(path))
        if real.is_dir():
            raise ToolError(f"{path}: a folder ({listing(real, self.host.problem.private[1:])})")
        if not real.is_file():
            problem = self.host.problem
            raise ToolError(
                f"{path}: no such file; relative paths start at the workspace {problem.workspace} "
                f"(this problem's files: {problem.name}/problem.py, {problem.name}/v001.py, ...)"
            )
        if real.stat().st_size > MAX_FILE_BYTES:
            raise ToolError(f"{path} is {real.stat().st_size:,} bytes: too large to read; search it instead")
        data = real.read_bytes()
        if b"\x00" in data[:8192]:
            raise ToolError(f"{path} is a binary file")
        return window(data.decode(errors="replace").splitlines(), offset, str(path))

    def _resolve(self, raw: str) -> Path:
        """Relative paths: the workspace's first, then the context folder's ('context/x' or 'x')."""
        problem = self.host.problem
        real = confine(raw, problem.roots, problem.workspace, problem.private)
        if real.exists() or problem.context is None or Path(raw).is_absolute():
            return real
        inside = raw.split("/", 1)[1] if raw.startswith(f"{problem.context.name}/") else raw
        in_context = confine(inside, problem.roots, problem.context, problem.private)
        if in_context.exists():
            return in_context
        return self._package_file(raw) or real

    def _package_file(self, raw: str) -> Path | None:
        """An installed package's file that the context index holds (site/<package>/...), read only; no other."""
        context = self.host.problem.context
        if context is None or not raw.startswith("site/"):
            return None
        try:
            return ContextIndex(index_path(self.host.problem, context), context).package_file(raw)
        except (IndexUnavailable, sqlite3.Error, OSError):
            return None

    def tool_search_context(self, query: str) -> str:
        context = self.host.problem.context
        if context is None or not context.is_dir():
            raise ToolError("this problem has no context folder")
        terms = [t.lower() for t in re.findall(r"[\w.+-]+", str(query)) if len(t) > 1]
        if not terms:
            raise ToolError("give some words to search for")
        try:
            index = self._context_index(context)
            hits = index.search(str(query), INDEX_HITS)
        except (IndexUnavailable, sqlite3.Error, OSError) as exc:
            return f"[no search index ({exc}): a plain word match instead]\n" + search(context, terms)
        if not hits:
            return f"nothing in the context folder matches {' '.join(terms)}"
        return cut(format_hits(hits, str(query)), hint="search for more specific words")

    def _context_index(self, context: Path) -> ContextIndex:
        """The index, brought up to date on first use and then at most every INDEX_REFRESH_S."""
        index = ContextIndex(index_path(self.host.problem, context), context)
        if self.index_checked is None or time.monotonic() - self.index_checked > INDEX_REFRESH_S:
            index.refresh()
            self.index_checked = time.monotonic()
        return index

    def tool_read_dump(
        self, version: str, kind: str, kernel: str | None = None, grep: str | None = None, offset: int = 1
    ) -> str:
        files = [d for d in self.host.dumps(str(version).strip()) if d.get("kind") == kind]
        if not files:
            kinds = sorted({d.get("kind") or "" for d in self.host.dumps(str(version).strip())})
            have = f"; it has {', '.join(kinds)}" if kinds else "; it has no dumps (did it compile?)"
            raise ToolError(f"no {kind} dump for {version}{have}")
        names = sorted({str(d.get("kernel")) for d in files})
        chosen = [d for d in files if not kernel or d.get("kernel") == kernel]
        if not chosen:
            raise ToolError(f"no kernel {kernel!r} in {version}'s {kind}; kernels: {', '.join(names)}")
        if chosen[0].get("pruned"):
            raise ToolError(f"{version}'s dumps were pruned (kerneltui gc, or the workspace's dumps budget)")
        path = Path(chosen[0]["path"])
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError as exc:
            raise ToolError(f"{path}: {exc.strerror}") from None
        head = f"{version} {kind} of {chosen[0].get('kernel')} ({len(lines)} lines; kernels: {', '.join(names)})\n"
        if grep:
            return head + grep_lines(lines, grep)
        return head + window(lines, offset, f"{version} {kind}", DUMP_WINDOW_LINES)

    def tool_profile(self, version: str) -> str:
        return cut(self.host.profile(self._known(version)))

    def tool_sanitize(self, version: str) -> str:
        return cut(self.host.sanitize(self._known(version)))

    def _known(self, version: str) -> str:
        """The version's name, or a ToolError naming those there are."""
        name = str(version).strip()
        if name not in self.host.version_names():
            names = ", ".join(self.host.version_names()) or "none yet"
            raise ToolError(f"no version {version!r}; versions: {names}")
        return name


def index_path(problem: ProblemInfo, context: Path) -> Path:
    """The index in kerneltui's state folder (the first private one), as `kerneltui context index` makes it."""
    return index_file(problem.private[0] if problem.private else None, context)


def brief_args(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments as stored in the transcript: code is kept whole in the version file, not here."""
    return {k: (f"<{len(v.splitlines())} lines>" if k == "code" and isinstance(v, str) else v) for k, v in args.items()}


def describe_call(name: str, args: dict[str, Any]) -> str:
    if name == "write_version":
        notes = str(args.get("notes") or "").strip().splitlines()
        return f'write_version "{notes[0][:80] if notes else ""}"'
    shown = " ".join(f"{k}={v}" for k, v in brief_args(args).items() if v not in (None, ""))
    return f"{name} {shown}".strip()


def record_call(host: Host, name: str, args: dict[str, Any]) -> None:
    host.record("tool_call", describe_call(name, args), tool=name, args=brief_args(args))


def record_result(host: Host, name: str, output: str, ok: bool, judged: Judged | None = None) -> None:
    version, status = (judged.version, judged.status) if judged else (None, None)
    host.record("tool_result", output, tool=name, ok=ok, version=version, status=status)


def listing(folder: Path, hidden: tuple[Path, ...] = (), limit: int = 40) -> str:
    """The folder's entries, but for `hidden` ones (in a bench, other agents' folders: even their names)."""
    closed = {os.path.realpath(h) for h in hidden}
    entries = [p for p in folder.iterdir() if os.path.realpath(p) not in closed]
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in entries)
    return ", ".join(names[:limit]) + (f", … {len(names) - limit} more" if len(names) > limit else "")


def window(lines: list[str], offset: int, label: str, size: int | None = None) -> str:
    """Lines from `offset` (1-based), numbered, cut to a size with a note of how to read on."""
    start = max(1, int(offset or 1))
    if start > max(1, len(lines)):
        raise ToolError(f"{label} has {len(lines)} lines; offset {start} is past the end")
    chosen = lines[start - 1 : start - 1 + size] if size else lines[start - 1 :]
    text = "".join(f"{start + i:>5}  {line}\n" for i, line in enumerate(chosen))
    shown_to = start - 1 + len(chosen)
    if size and shown_to < len(lines):
        text += f"[lines {start}-{shown_to} of {len(lines)}; pass offset={shown_to + 1} for more]"
    return cut(text, hint="pass a larger offset to read on")


def grep_lines(lines: list[str], pattern: str, around: int = 2) -> str:
    """The lines matching `pattern`, with context. The agent's pattern runs with a time limit (the `regex`
    module's): one that backtracks for ever, `(.|.)*!`, held the GIL and froze the whole server."""
    try:
        compiled = regex.compile(pattern, regex.IGNORECASE | regex.VERSION0)
    except regex.error as exc:
        raise ToolError(f"grep {pattern!r} is not a regular expression: {exc}") from None
    deadline = time.monotonic() + GREP_BUDGET_S
    try:
        hits = [i for i, line in enumerate(lines) if compiled.search(line, timeout=_left(deadline))]
    except TimeoutError:
        raise ToolError(f"grep {pattern!r} took over {GREP_BUDGET_S:g} s: give a simpler pattern") from None
    if not hits:
        return f"no line matches {pattern!r}"
    keep: list[int] = sorted({j for i in hits for j in range(max(0, i - around), min(len(lines), i + around + 1))})
    out, last = [], -2
    for j in keep:
        if j != last + 1:
            out.append("   --")
        out.append(f"{j + 1:>5}{':' if j in hits else ' '} {lines[j]}")
        last = j
    return cut(f"{len(hits)} matching lines\n" + "\n".join(out), hint="narrow the grep")


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.0)


def text_files(root: Path) -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for name in files:
            path = Path(folder) / name
            if path.suffix.lower() in TEXT_SUFFIXES or name in ("README", "LICENSE"):
                found.append(path)
    return sorted(found)


def search(root: Path, terms: list[str]) -> str:
    """Files ranked by how many of the words they hold, then their matching lines."""
    ranked: list[tuple[int, int, Path, list[tuple[int, str]]]] = []
    for path in text_files(root):
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        lowered = [line.lower() for line in lines]
        present = {t for t in terms if any(t in line for line in lowered)}
        if not present:
            continue
        matching = [(i + 1, lines[i]) for i, line in enumerate(lowered) if any(t in line for t in present)]
        ranked.append((-len(present), -len(matching), path, matching))
    if not ranked:
        return f"nothing in the context folder matches {' '.join(terms)}"
    ranked.sort(key=lambda r: (r[0], r[1], str(r[2])))
    out, shown = [], 0
    for neg_present, _, path, matching in ranked:
        rel = path.relative_to(root)
        out.append(f"{rel}  ({-neg_present} of {len(terms)} words, {len(matching)} lines)")
        for line_no, line in matching[:5]:
            out.append(f"  {rel}:{line_no}: {line.strip()[:200]}")
            shown += 1
        if shown >= SEARCH_HITS:
            out.append(f"[{len(ranked)} files matched; showing the first; read_file one for more]")
            break
    return cut("\n".join(out))
