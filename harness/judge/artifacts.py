"""Compiled kernels' artifacts: collected from a worker's caches, resources read, SASS disassembled.

The worker wrote these files, so they are treated as data: copied out of its scratch folder through
harness.wire.scratch (no links followed, regular files only, size-capped) into files the judge names, and
read only by NVIDIA's own tools (cuobjdump, nvdisasm, ptxas: from the CUDA toolkit or Triton's wheel), confined, and
by harness.judge.cubin's bounds-checked reader of a cubin's resource sections.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import re
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Set
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.containment.confined import ToolLimits, run_confined
from harness.contract.kernel_names import CUDA_KERNEL, KERNEL_NAME
from harness.contract.text import printable
from harness.judge import cubin as cubin_mod
from harness.wire import scratch as scratch_mod

TRITON_KINDS = ("ttir", "ttgir", "llir", "ptx", "cubin")
TILELANG_KINDS = ("tl", "tir", "cu", "ptx", "cubin")  # TileLang program, lowered device IR, CUDA source, ...
MAX_DISASSEMBLERS = 32
MAX_META_BYTES = 256 << 10
MAX_META_KEYS = 64
MAX_ENTRIES = 10_000
MAX_REFUSALS = 8
SMEM_LIMITS = {90: 232448, 100: 232448, 89: 101376, 86: 101376, 80: 166912, 75: 65536}


@dataclass
class Kernel:
    name: str
    dsl: str
    files: dict[str, Path] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    case: str = ""
    constexprs: dict[str, Any] = field(default_factory=dict)  # as the launch that compiled it passed them
    label: str = ""  # its name in the dumps folder (name-2 for a second specialisation of name)
    group: str = ""  # its Triton cache group (the cache key), as the worker named it

    def summary(self) -> dict[str, Any]:
        keep = ("num_warps", "num_stages", "shared", "target")
        return {
            "name": self.name,
            "dsl": self.dsl,
            "case": self.case,
            **{k: self.meta[k] for k in keep if k in self.meta},
            **self.resources,
            **({"constexprs": self.constexprs} if self.constexprs else {}),
        }


MAX_CONSTEXPRS, MAX_CONSTEXPR_CHARS = 16, 80


def specialise(kernels: list[Kernel], launches: list[dict[str, Any]]) -> None:
    """Each Triton kernel's constexprs, from the recorded launch of the compiled kernel with its metadata's hash
    (the worker's word, shown as a label: the compiled binary itself is what is judged and dumped)."""
    by_hash = {str(launch["hash"]): launch for launch in launches if isinstance(launch, dict) and launch.get("hash")}
    for kernel in kernels:
        launch = by_hash.get(str(kernel.meta.get("hash")))
        raw = launch.get("constexprs") if launch else None
        if isinstance(raw, dict):
            kernel.constexprs = {
                str(k)[:MAX_CONSTEXPR_CHARS]: v if isinstance(v, (int, float, bool)) else str(v)[:MAX_CONSTEXPR_CHARS]
                for k, v in list(raw.items())[:MAX_CONSTEXPRS]
            }


def find_tool(name: str) -> str | None:
    """A CUDA binary tool: $KERNELTUI_<NAME>, Triton's bundled copy, $CUDA_HOME/bin, then PATH."""
    override = os.environ.get(f"KERNELTUI_{name.upper()}")
    if override:
        return override
    spec = importlib.util.find_spec("triton")
    candidates = []
    if spec and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            candidates.append(Path(root) / "backends" / "nvidia" / "bin" / name)
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            candidates.append(Path(home) / "bin" / name)
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


TOOL_LIMITS = ToolLimits(timeout_s=30.0, memory_bytes=4 << 30, output_bytes=64 << 20)
TOOLS_SECONDS = 120.0  # for one look at a version's kernels: a cubin crafted to hang a tool costs its kernels' SASS


class ToolClock:
    """The time left to the tools run on one look at a version's kernels (they run on threads, at once)."""

    def __init__(self, seconds: float = TOOLS_SECONDS) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


def _run_tool(args: list[str], reads: list[Path], clock: ToolClock | None = None) -> tuple[int, str]:
    """A CUDA tool on files the worker wrote, confined (harness.containment.confined); its failure said in its
    output."""
    left = clock.left() if clock is not None else TOOL_LIMITS.timeout_s
    if left <= 0 and clock is not None:
        return 1, f"{Path(args[0]).name} not run: this version's kernels took its tools past {clock.seconds:g} s"
    limits = dataclasses.replace(TOOL_LIMITS, timeout_s=min(TOOL_LIMITS.timeout_s, left))
    done = run_confined(args, reads, limits)
    if done.failure:
        return 1, done.failure
    return done.code, done.output


@dataclass
class Caps:
    """What one version's collection may take from its workers' scratch folders."""

    kernels: int = 64
    file_bytes: int = 16 << 20
    version_bytes: int = 128 << 20


@dataclass
class Collected:
    """One version's collection so far: what it took (within its caps) and what it refused. Every refusal
    flags the version: honest compilers leave none of it."""

    caps: Caps = field(default_factory=Caps)
    kernels: int = 0
    held_bytes: int = 0
    refused: list[str] = field(default_factory=list)
    full: bool = False  # at its kernel cap: nothing more is looked at

    def refuse(self, what: str) -> None:
        said = printable(what[:300])  # it names the worker's files: any byte may be in their names
        if said not in self.refused and len(self.refused) < MAX_REFUSALS:
            self.refused.append(said)

    def take_kernel(self) -> bool:
        if self.kernels >= self.caps.kernels:
            self.refuse(f"more than {self.caps.kernels} compiled kernels (the rest were not collected)")
            self.full = True
            return False
        self.kernels += 1
        return True

    def read(self, scratch: Path, relative: str) -> bytes | None:
        """A file's bytes within the caps; None when it is not there or was refused (and the refusal noted)."""
        try:
            data = scratch_mod.read_file(scratch, relative, self.caps.file_bytes)
        except scratch_mod.Missing:
            return None
        except scratch_mod.Untrusted as exc:
            self.refuse(str(exc))
            return None
        if self.held_bytes + len(data) > self.caps.version_bytes:
            self.refuse(f"{relative}: the version's compiled files passed {self.caps.version_bytes >> 20} MiB")
            return None
        self.held_bytes += len(data)
        return data

    def read_json(self, scratch: Path, relative: str) -> object:
        try:
            return scratch_mod.read_json(scratch, relative, MAX_META_BYTES)
        except scratch_mod.Missing:
            return None
        except scratch_mod.Untrusted as exc:
            self.refuse(str(exc))
            return None

    def listing(self, scratch: Path, relative: str) -> list[scratch_mod.Entry]:
        """A folder's entries; what is neither file nor folder refused."""
        found = scratch_mod.entries(scratch, relative, limit=MAX_ENTRIES)
        for entry in found:
            if entry.kind == "other":
                self.refuse(f"{relative}/{entry.name} is a link or not a regular file")
        return found


def collect_triton(
    scratch: Path,
    into: Path,
    subdir: str = "triton",
    skip: Set[str] = frozenset(),
    collected: Collected | None = None,
    only: Set[str] | None = None,
) -> list[Kernel]:
    """One Kernel per compiled specialization in the worker's Triton cache (scratch/subdir), copied into `into`;
    cache groups named in `skip` (what the worker compiled before it loaded the version) left out, and where
    `only` names some, every other (an entry planted under a kernel's name: only launched ones are listed).

    The worker wrote that cache, so it is read through harness.wire.scratch (no links, regular files, capped by
    `collected`, which notes what was refused) and every name the judge writes with is its own: a kernel's
    name from its metadata is only a label.
    """
    collected = collected if collected is not None else Collected()
    kernels: list[tuple[int, Kernel]] = []
    unlaunched = 0
    for group in collected.listing(scratch, subdir):
        if collected.full:
            break
        if group.kind != "dir" or group.name in skip:
            continue
        if only is not None and group.name not in only:
            unlaunched += 1  # never read: only counted
            continue
        for item in collected.listing(scratch, f"{subdir}/{group.name}"):
            if item.kind != "file" or not item.name.endswith(".json") or item.name.startswith("__grp__"):
                continue
            relative = f"{subdir}/{group.name}/{item.name}"
            meta = _read_meta(scratch, relative, collected)
            if meta is None or not collected.take_kernel():
                continue
            stem = item.name[: -len(".json")]
            local = into / scratch_mod.safe_name(group.name, "group") / scratch_mod.safe_name(stem)
            files = _copy_artifacts(scratch, f"{subdir}/{group.name}/{stem}", local, TRITON_KINDS, collected)
            if "cubin" in files:
                kernel = Kernel(
                    name=scratch_mod.safe_name(meta["name"]), dsl="triton", files=files, meta=meta, group=group.name
                )
                kernels.append((item.mtime_ns, kernel))
    if unlaunched > collected.caps.kernels:  # more than a version compiles: planted
        collected.refuse(f"more than {collected.caps.kernels} entries in its Triton cache that no launch compiled")
    return [kernel for _, kernel in sorted(kernels, key=lambda pair: (pair[1].name, pair[0]))]


def _read_meta(scratch: Path, relative: str, collected: Collected) -> dict[str, Any] | None:
    """A Triton cache entry's metadata, kept to plain values (it is shown, and written back out as JSON)."""
    meta = collected.read_json(scratch, relative)
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return None  # not a kernel's metadata (an autotuner's cache, say)
    if not KERNEL_NAME.fullmatch(meta["name"]):
        collected.refuse(f"{relative} names its kernel {meta['name'][:80]!r}, not an identifier")
        return None
    return _plain(meta)


def _plain(meta: dict[str, Any]) -> dict[str, Any]:
    """Metadata kept to plain values (it is shown, and written back out as JSON), its counts whole numbers."""
    plain = (str, int, float, bool, type(None), list, dict)
    kept = {str(k): v for k, v in list(meta.items())[:MAX_META_KEYS] if isinstance(v, plain)}
    for key in ("num_warps", "num_stages", "shared"):
        if key in kept and (not isinstance(kept[key], int) or isinstance(kept[key], bool)):
            kept.pop(key)
    return kept


def _copy_artifacts(
    scratch: Path, stem: str, local: Path, kinds: tuple[str, ...], collected: Collected
) -> dict[str, Path]:
    """Copies stem.<kind> for each kind out of the scratch folder into judge-owned files local.<kind>."""
    files: dict[str, Path] = {}
    for kind in kinds:
        target = local.with_name(f"{local.name}.{kind}")
        if not target.exists():
            data = collected.read(scratch, f"{stem}.{kind}")
            if data is None:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        files[kind] = target
    return files


def collect_cutedsl(
    scratch: Path, into: Path, subdir: str = "cute", collected: Collected | None = None
) -> list[Kernel]:
    """CuTeDSL's CUTE_DSL_KEEP output (scratch/subdir): one .ptx/.cubin pair per compiled function, copied."""
    collected = collected if collected is not None else Collected()
    kernels: list[Kernel] = []
    for relative, _ in _walk(scratch, subdir, collected, depth=6):
        if not relative.endswith(".cubin") or collected.full or not collected.take_kernel():
            continue
        stem = relative[: -len(".cubin")]
        local = into / "cute" / _unique_name(stem.replace("/", "_"))
        files = _copy_artifacts(scratch, stem, local, ("cubin", "ptx"), collected)
        if "cubin" not in files:
            continue
        name = _ptx_entry(files["ptx"]) if "ptx" in files else None
        fallback = scratch_mod.safe_name(Path(stem).name.split(".")[0])
        label = scratch_mod.safe_name(name, fallback) if name else fallback
        kernels.append(Kernel(name=label, dsl="cutedsl", files=files))
    return kernels


def _walk(scratch: Path, subdir: str, collected: Collected, depth: int) -> list[tuple[str, int]]:
    others: list[str] = []
    found = scratch_mod.walk_files(scratch, subdir, depth=depth, others=others)
    for path in others:
        collected.refuse(f"{path} is a link or not a regular file")
    return found


def _unique_name(stem: str) -> str:
    """A file name of the judge's own for stem. CuTeDSL's stems run past the name limit and differ only at their
    end (the Constexpr values of each specialisation): a cut one ends with a hash of the whole, so none collide."""
    name = scratch_mod.safe_name(stem)
    if name == stem:
        return name
    digest = hashlib.sha256(stem.encode()).hexdigest()[:12]
    return f"{name[: scratch_mod.MAX_NAME - len(digest) - 1]}-{digest}"


def collect_tilelang(
    scratch: Path, into: Path, subdir: str = "tilelang", collected: Collected | None = None
) -> list[Kernel]:
    """What harness.worker.tilelang_hooks wrote per compiled TileLang kernel (scratch/subdir): its program (.tl),
    device IR (.tir), CUDA source (.cu) and, where nvcc was found, .ptx and .cubin, copied; its metadata
    (.json: the dynamic shared memory it asks for at launch, the worker's word as Triton's is)."""
    collected = collected if collected is not None else Collected()
    kernels: list[Kernel] = []
    for relative, _ in sorted(_walk(scratch, subdir, collected, depth=0)):
        if not relative.endswith(".cu") or collected.full or not collected.take_kernel():
            continue
        stem = relative[: -len(".cu")]
        local = into / "tilelang" / scratch_mod.safe_name(Path(stem).name)
        files = _copy_artifacts(scratch, stem, local, TILELANG_KINDS, collected)
        if "cu" not in files:
            continue
        entry = _ptx_entry(files["ptx"]) if "ptx" in files else _cuda_entry(files["cu"])
        name = scratch_mod.safe_name(entry or Path(stem).name.rsplit("-", 1)[0])
        meta = {**(_tilelang_meta(scratch, f"{stem}.json", collected) or {}), **_nvcc_note(scratch, stem, collected)}
        kernels.append(Kernel(name=name, dsl="tilelang", files=files, meta=meta))
    return kernels


def _tilelang_meta(scratch: Path, relative: str, collected: Collected) -> dict[str, Any] | None:
    meta = collected.read_json(scratch, relative)
    return _plain(meta) if isinstance(meta, dict) else None


def _cuda_entry(source: Path) -> str | None:
    match = CUDA_KERNEL.search(source.read_text(errors="replace")[: 1 << 20])
    return match.group(1) if match else None


def _nvcc_note(scratch: Path, stem: str, collected: Collected) -> dict[str, Any]:
    """Why a TileLang kernel has no PTX or cubin (no nvcc in the worker's Python, or it refused the source)."""
    data = collected.read(scratch, f"{stem}.nvcc.txt")
    return {"nvcc_error": data.decode(errors="replace").strip()[-400:]} if data is not None else {}


def _ptx_entry(ptx: Path) -> str | None:
    match = re.search(r"\.entry\s+([\w$]+)", ptx.read_text(errors="replace")[: 1 << 20])
    return match.group(1) if match else None


def read_resources(kernel: Kernel, clock: ToolClock | None = None) -> None:
    """Registers, stack, shared and local memory from the cubin's own sections (harness.judge.cubin), or from
    cuobjdump where they do not parse; exact spill bytes from ptxas when the kernel has a local-memory frame (where
    spills go: cuobjdump's LOCAL counts only declared local arrays, and reads 0 for a kernel spilling 152 B)."""
    cubin = kernel.files.get("cubin")
    if not cubin:
        return
    usage = _function_usage(cubin_mod.resource_usage(cubin.read_bytes()), kernel.name)
    if usage is None:
        usage = _tool_resource_usage(kernel, cubin, clock)
        if usage is None:
            return
    frame = usage.pop("frame_bytes", usage["local_bytes"] or usage["stack_bytes"])
    kernel.resources.update(usage)
    kernel.resources["spill_bytes"] = 0
    if frame > 0:
        spilled = _ptxas_spills(kernel, clock)
        kernel.resources["spill_bytes"] = frame if spilled is None else spilled
        kernel.resources["spills_from"] = "frame" if spilled is None else "ptxas"


def _function_usage(found: dict[str, dict[str, int]] | None, name: str) -> dict[str, int] | None:
    """The kernel's own entry in the cubin: by its name, or the cubin's only function."""
    if not found:
        return None
    if name in found:
        return dict(found[name])
    return dict(next(iter(found.values()))) if len(found) == 1 else None


def _tool_resource_usage(kernel: Kernel, cubin: Path, clock: ToolClock | None) -> dict[str, int] | None:
    """cuobjdump's word, for a cubin this reader does not parse; its failure noted on the kernel."""
    cuobjdump = find_tool("cuobjdump")
    if not cuobjdump:
        return None
    code, text = _run_tool([cuobjdump, "--dump-resource-usage", str(cubin)], [cubin], clock)
    if code != 0:
        kernel.resources["error"] = text.strip()[-300:]
        return None
    return _parse_resource_usage(text)


def _parse_resource_usage(text: str) -> dict[str, int]:
    fields = dict(re.findall(r"\b(REG|STACK|SHARED|LOCAL):(\d+)", text))
    return {
        "registers": int(fields.get("REG", 0)),
        "stack_bytes": int(fields.get("STACK", 0)),
        "smem_bytes": int(fields.get("SHARED", 0)),
        "local_bytes": int(fields.get("LOCAL", 0)),
    }


def _ptxas_spills(kernel: Kernel, clock: ToolClock | None) -> int | None:
    """Spill stores and loads in bytes, as ptxas -v counts them: from the first ptxas that reads this PTX (Triton
    writes the PTX version of the ptxas it used, which may be its Blackwell one)."""
    ptx = kernel.files.get("ptx")
    if not ptx:
        return None
    target = re.search(r"\.target\s+(sm_\w+)", ptx.read_text(errors="replace"))
    arch = target.group(1) if target else "sm_90a"
    for ptxas in filter(None, (find_tool("ptxas"), find_tool("ptxas-blackwell"))):
        code, text = _run_tool([ptxas, f"-arch={arch}", "-v", str(ptx), "-o", os.devnull], [ptx], clock)
        found = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
        if code == 0 and found:
            return sum(int(a) + int(b) for a, b in found)
    return None


class Listings:
    """SASS listings by the tool that made them and the cubin's bytes: a judge disassembles the same cubin again
    for every version that compiles a kernel unchanged (a rewrite of its notes, a version judged again, a race's
    best), and nvdisasm costs ~0.3 s a call. Bounded by the characters it holds, oldest dropped first."""

    def __init__(self, max_chars: int = 32 << 20) -> None:
        self.max_chars = max_chars
        self.held: OrderedDict[str, str] = OrderedDict()
        self.chars = 0
        self.lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self.lock:
            if key in self.held:
                self.held.move_to_end(key)
            return self.held.get(key)

    def put(self, key: str, text: str) -> None:
        with self.lock:
            if key in self.held or len(text) > self.max_chars:
                return
            self.held[key] = text
            self.chars += len(text)
            while self.chars > self.max_chars:
                self.chars -= len(self.held.popitem(last=False)[1])


LISTINGS = Listings()


def disassemble(cubin: Path | None) -> str | None:
    """SASS with source lines interleaved (nvdisasm -g), or cuobjdump's plain listing."""
    return disassemble_noting(cubin)[0]


def disassemble_noting(cubin: Path | None, clock: ToolClock | None = None) -> tuple[str | None, str | None]:
    """(the SASS listing, or None and why not): each tool's failure (a timeout, its limits) is said."""
    if cubin is None:
        return None, None
    digest = hashlib.sha256(cubin.read_bytes()).hexdigest()
    why: list[str] = []
    for name, args in (("nvdisasm", ["-c", "-g"]), ("cuobjdump", ["--dump-sass"])):
        tool = find_tool(name)
        if not tool:
            continue
        key = f"{tool}\0{digest}"
        text = LISTINGS.get(key)
        if text is None:
            code, text = _run_tool([tool, *args, str(cubin)], [cubin], clock)
            if code != 0 or not text.strip():
                why.append(text.strip().splitlines()[-1][:200] if text.strip() else f"{name} printed nothing")
                continue
            LISTINGS.put(key, text)
        return text, None
    return None, "; ".join(why) or None


Listing = tuple[str | None, str | None]  # disassemble_noting's: the SASS, or None and why not


def listings_ahead(kernels: list[Kernel], pool: ThreadPoolExecutor) -> dict[str, Future[Listing]]:
    """Each kernel's SASS listing begun on `pool` (by its cubin's path), for write_dumps to take: on a GPU the
    disassembly runs while the benchmark times, not after it (nvdisasm: ~0.3 s a cubin, the dumps rung's time)."""
    clock = ToolClock()
    cubins = {str(c): c for k in kernels if (c := k.files.get("cubin")) is not None}
    return {key: pool.submit(disassemble_noting, cubin, clock) for key, cubin in cubins.items()}


def write_dumps(
    kernels: list[Kernel],
    dest: Path,
    budget_bytes: int = Caps.version_bytes,
    ahead: dict[str, Future[Listing]] | None = None,
    between: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Copies every artifact (plus .sass) to dest as <kernel>.<kind>, within `budget_bytes` in all (a kernel's
    files past it are not kept, and it says so); returns the list of files. `ahead`: listings begun already
    (listings_ahead), by cubin path. `between`: called before waiting on a listing not done yet (the judge's
    interlude: other versions' verdicts while nvdisasm runs)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    clock = ToolClock()
    begun = dict(ahead or {})

    def listing(kernel: Kernel) -> Listing:
        cubin = kernel.files.get("cubin")
        started = begun.pop(str(cubin), None) if cubin is not None else None
        return started.result() if started is not None else disassemble_noting(cubin, clock)

    # nvdisasm is the slow part: ~0.3 s a cubin whatever its size (its own start-up), one cubin a run; all at once
    with ThreadPoolExecutor(max_workers=max(1, min(len(kernels), MAX_DISASSEMBLERS, os.cpu_count() or 1))) as pool:
        pending = [pool.submit(listing, kernel) for kernel in kernels]
        sass_listings = []
        for future in pending:
            if between is not None and not future.done():
                between()
            sass_listings.append(future.result())
    listed: list[dict[str, Any]] = []
    used: dict[str, int] = {}
    left = budget_bytes
    for kernel, (sass, why) in zip(kernels, sass_listings, strict=True):
        count = used[kernel.name] = used.get(kernel.name, 0) + 1
        base = kernel.label = kernel.name if count == 1 else f"{kernel.name}-{count}"
        if why:
            kernel.resources["sass_error"] = why
        kept = [(kind, src.stat().st_size) for kind, src in kernel.files.items()]
        kept += [("sass", len(sass.encode()))] if sass else []
        for kind, size in kept:
            if size > left:
                kernel.resources.setdefault("not_kept", []).append(kind)
                continue
            left -= size
            target = dest / f"{base}.{kind}"
            if kind == "sass" and sass:
                target.write_text(sass)
            else:
                shutil.copyfile(kernel.files[kind], target)
            listed.append(_listing(kernel, base, kind, target))
        if kernel.meta:
            (dest / f"{base}.json").write_text(json.dumps(kernel.meta, indent=1, default=str))
    return listed


def _listing(kernel: Kernel, base: str, kind: str, path: Path) -> dict[str, Any]:
    return {
        "kernel": base,
        "dsl": kernel.dsl,
        "kind": kind,
        "path": str(path),
        "bytes": path.stat().st_size,
        "case": kernel.case,
    }


def smem_limit(arch: str) -> int | None:
    match = re.match(r"sm_(\d+)", arch)
    return SMEM_LIMITS.get(int(match.group(1))) if match else None
