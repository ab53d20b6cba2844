"""PTX, SASS, TTGIR, LLIR and TTIR of the selected version (and a TileLang version's CUDA source, TIR and
TileLang program): a kernel picker, search, highlighting, and a SASS diff against another version. SASS shows
the version's own source lines where nvdisasm recorded them (v007.py:14  x = tl.load(...))."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Static

from kerneltui.ui.widgets.format import cut_lines, lines_of, shown
from kerneltui.ui.widgets.text_view import MatchMoved, TextView

KINDS = ("sass", "ptx", "ttgir", "llir", "ttir")
TILELANG_KINDS = ("cu", "tir", "tl")  # listed after KINDS for the versions that have them
MAX_BYTES = 32 << 20
BAR_CHARS = 400  # the bar and the specialisation line: one line each, names in them cut
SASS_LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*(?:/\*\s*0x[0-9a-f]+\s*\*/)?\s*$")
SASS_ENCODING_ONLY = re.compile(r"^\s*/\*\s*0x[0-9a-f]+\s*\*/\s*$")
SOURCE_MARK = re.compile(r'^\s*//## File "([^"]+)", line (\d+)')
OPCODE = re.compile(r"^(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)")
REGISTER = re.compile(r"\b(U?R\d+|U?P\d+|RZ|URZ|PT|SR_\w+)\b")
COMMENT = re.compile(r"(//.*$|;.*$)")
DIRECTIVE = re.compile(r"^\s*(\.\w+|[%@]\w+|tt\.\w+|ttg\.\w+|define|declare)")


def sass_lines(text: str, version_path: str, source: str) -> list[Text]:
    """nvdisasm output, decluttered: no hex encodings, source lines inlined from the version's text."""
    source_lines, _ = lines_of(source)
    out: list[Text] = []
    for raw in cut_lines(text):
        if SASS_ENCODING_ONLY.match(raw):
            continue
        mark = SOURCE_MARK.match(raw)
        if mark:
            out.append(_source_line(mark.group(1), int(mark.group(2)), version_path, source_lines))
            continue
        instruction = SASS_LINE.match(raw)
        if instruction:
            out.append(_instruction(instruction.group(1), instruction.group(2)))
        elif raw.strip():
            out.append(Text(raw.rstrip(), style="dim"))
    return out


def _source_line(file: str, line: int, version_path: str, source_lines: list[str]) -> Text:
    text = Text(f"{Path(file).name}:{line}", style="bold cyan")
    if Path(file).name == Path(version_path).name and 0 < line <= len(source_lines):
        text.append(f"   {source_lines[line - 1].strip()}", style="cyan")
    return text


def _instruction(address: str, body: str) -> Text:
    text = Text(f"  /*{address}*/  ", style="dim")
    start = len(text)
    text.append(body)
    opcode = OPCODE.match(body)
    if opcode:
        text.stylize("bold yellow", start + opcode.start(2), start + opcode.end(2))
    for register in REGISTER.finditer(body):
        text.stylize("magenta", start + register.start(), start + register.end())
    return text


def ir_lines(text: str) -> list[Text]:
    out = []
    for raw in cut_lines(text):
        line = Text(raw)
        directive = DIRECTIVE.match(raw)
        if directive:
            line.stylize("bold yellow", directive.start(1), directive.end(1))
        comment = COMMENT.search(raw) if raw.lstrip().startswith(("//", ";")) else None
        if comment:
            line.stylize("dim", comment.start())
        out.append(line)
    return out


def normalized_sass(text: str) -> list[str]:
    """Instructions only, without addresses or encodings: what a SASS diff should compare."""
    return [m.group(2) for raw in cut_lines(text) if (m := SASS_LINE.match(raw))]


def sass_diff_lines(old: str, new: str, old_label: str, new_label: str) -> list[Text]:
    a, b = normalized_sass(old), normalized_sass(new)
    out = [
        Text(f"--- {old_label} ({len(a)} instructions)", style="bold red"),
        Text(f"+++ {new_label} ({len(b)} instructions)", style="bold green"),
    ]
    for line in difflib.unified_diff(a, b, lineterm="", n=2):
        if line.startswith(("---", "+++")):
            continue
        style = (
            "green"
            if line.startswith("+")
            else "red"
            if line.startswith("-")
            else "cyan"
            if line.startswith("@@")
            else ""
        )
        out.append(Text(line, style=style))
    if len(out) == 2:
        out.append(Text("(identical instruction streams)", style="dim"))
    return out


def spec_text(spec: dict[str, Any] | None) -> Text:
    """A kernel's specialisation as compiled: its constexprs, warps, stages, registers, spills, and the case that
    compiled it ('BLOCK=1024 · 4 warps · 3 stages · 26 regs · case n=4097')."""
    if not spec:
        return Text()
    out = Text()
    constexprs = spec.get("constexprs")
    if isinstance(constexprs, dict) and constexprs:
        out.append(" ".join(f"{k}={v}" for k, v in constexprs.items()) + " · ", style="bold")
    for key, unit in (("num_warps", "warps"), ("num_stages", "stages"), ("registers", "regs")):
        if isinstance(spec.get(key), int):
            out.append(f"{spec[key]} {unit} · ")
    spills = spec.get("spill_bytes")
    if isinstance(spills, int) and spills > 0:
        out.append(f"{spills} B spilled · ", style="bold red")
    if spec.get("case"):
        out.append(f"case {spec['case']}", style="dim")
    out.rstrip()
    return Text(" ") + out if out.plain else out


def kernel_specs(rungs: list[Any]) -> dict[str, dict[str, Any]]:
    """Each dumped kernel's specialisation, by the name the Asm pane lists it under (the dumps rung's)."""
    dumps = next((r for r in rungs if getattr(r, "name", None) == "dumps" and r.metrics), None)
    kernels = dumps.metrics.get("kernels") if dumps is not None else None
    if not isinstance(kernels, list):
        return {}
    return {str(k["kernel"]): k for k in kernels if isinstance(k, dict) and k.get("kernel")}


def kernel_names(artifacts: list[dict[str, Any]]) -> list[str]:
    """The kernels of a version's artifacts, in the order they were compiled and dumped."""
    seen: list[str] = []
    for item in artifacts:
        if item["kernel"] not in seen:
            seen.append(item["kernel"])
    return seen


def kinds_of(artifacts: list[dict[str, Any]]) -> tuple[str, ...]:
    """The kinds `t` steps through: KINDS, then the TileLang kinds this version's dumps hold."""
    have = {item["kind"] for item in artifacts}
    return KINDS + tuple(kind for kind in TILELANG_KINDS if kind in have)


def read_text(path: str) -> str:
    file = Path(path)
    if not file.is_file():
        return ""
    with file.open("rb") as handle:
        return handle.read(MAX_BYTES).decode(errors="replace")


@dataclass(frozen=True)
class Listing:
    """One listing to read and colour, with everything it needs."""

    generation: int
    kernel: str
    kind: str
    comparing: bool
    files: dict[str, str]
    theirs: dict[str, str]
    their_kernel: str  # the other version's kernel paired with this one (renamed: the one at its position)
    compare_name: str
    version_name: str
    version_path: str
    source: str

    def lines(self) -> list[Text]:
        if self.comparing:
            if "sass" in self.files and "sass" in self.theirs:
                lines = sass_diff_lines(
                    read_text(self.theirs["sass"]),
                    read_text(self.files["sass"]),
                    f"{self.compare_name} {self.their_kernel}",
                    f"{self.version_name} {self.kernel}",
                )
                if self.their_kernel != self.kernel:
                    note = (
                        f"{self.compare_name} has no kernel {self.kernel}: paired by position with {self.their_kernel}"
                    )
                    lines.insert(0, Text(note, style="yellow"))
                return lines
            other = self.compare_name or "the other version"
            return [Text(f"{other} has no SASS for kernel {self.kernel}.", style="dim")]
        if self.kind not in self.files:
            have = ", ".join(sorted(self.files))
            return [Text(f"No {self.kind} for {self.kernel} (have: {have}).", style="dim")]
        if self.kind == "sass":
            return sass_lines(read_text(self.files["sass"]), self.version_path, self.source)
        return ir_lines(read_text(self.files[self.kind]))


class AsmPane(Vertical):
    DEFAULT_CSS = """
    AsmPane > #asm-bar { height: 1; color: $text-muted; }
    AsmPane > #asm-spec { height: 1; }
    AsmPane > TextView { height: 1fr; }
    """
    BINDINGS = [
        Binding("comma", "kernel(-1)", "prev kernel", show=False),
        Binding("full_stop", "kernel(1)", "next kernel", show=False),
        Binding("t", "kind", "next kind", show=False),
        Binding("c", "compare", "SASS diff", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.artifacts: list[dict[str, Any]] = []
        self.specs: dict[str, dict[str, Any]] = {}  # by kernel (as listed): its specialisation and resources
        self.compare_artifacts: list[dict[str, Any]] = []
        self.compare_name = ""
        self.version: dict[str, Any] = {}
        self.source = ""
        self.kernel_index = 0
        self.kind = "sass"
        self.comparing = False
        self.generation = 0  # of the listing asked for last
        self.listings_read = 0  # shown or not

    def compose(self) -> ComposeResult:
        yield Static("", id="asm-bar")
        yield Static("", id="asm-spec")
        yield TextView(id="asm-view")

    @property
    def view(self) -> TextView:
        return self.query_one("#asm-view", TextView)

    def kernels(self) -> list[str]:
        return kernel_names(self.artifacts)

    def paired_kernel(self, kernel: str) -> str:
        """The other version's kernel to diff `kernel` against: the same name, or (renamed) the one at the same
        position among its kernels; '' when it has none there."""
        theirs = kernel_names(self.compare_artifacts)
        if kernel in theirs:
            return kernel
        index = self.kernels().index(kernel)
        return theirs[index] if index < len(theirs) else ""

    def show(
        self,
        version: dict[str, Any],
        source: str,
        artifacts: list[dict[str, Any]],
        compare_name: str,
        compare_artifacts: list[dict[str, Any]],
        specs: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        same_version = self.version.get("evaluation_id") == version.get("evaluation_id")
        self.version, self.source, self.artifacts = version, source, artifacts
        self.specs = specs or {}
        self.compare_name, self.compare_artifacts = compare_name, compare_artifacts
        if not same_version:
            self.kernel_index = 0
        if self.kind not in kinds_of(artifacts):
            self.kind = "sass"
        self.reload()

    def bar_text(self) -> Text:
        kernels = self.kernels()
        bar = Text()
        bar.append(f"{self.version.get('name', '·')} · ", style="bold")
        if kernels:
            bar.append(f"{kernels[self.kernel_index]} {self.kernel_index + 1}/{len(kernels)} · ")
        if self.comparing:
            bar.append(f"SASS diff vs {self.compare_name or '·'} ", style="bold")
        else:
            for kind in kinds_of(self.artifacts):
                selected = kind == self.kind
                bar.append(f"[{kind.upper()}] " if selected else f"{kind} ", style="bold" if selected else "dim")
        label = self.view.match_label() if self.is_mounted else ""
        if label:
            bar.append(f"· {label} ", style="yellow")
        other = "listing" if self.comparing else f"diff vs {self.compare_name or '·'}"
        bar.append(f"· ,/. kernel  t listing  c {other}", style="dim")
        return bar

    def on_match_moved(self, message: MatchMoved) -> None:
        self.update_bar()

    def spec_line(self) -> Text:
        """The shown kernel's specialisation, on a line of its own under the bar."""
        kernels = self.kernels()
        spec = self.specs.get(kernels[self.kernel_index]) if kernels else None
        return spec_text(spec) if spec else Text("")

    def update_bar(self) -> None:
        self.query_one("#asm-bar", Static).update(shown(self.bar_text(), limit=BAR_CHARS))

    def reload(self) -> None:
        self.update_bar()
        self.query_one("#asm-spec", Static).update(shown(self.spec_line(), limit=BAR_CHARS))
        kernels = self.kernels()
        pruned = next((a.get("pruned") for a in self.artifacts if a.get("pruned")), None)
        if kernels and pruned:
            self.generation += 1
            why = f"pruned {str(pruned)[:16].replace('T', ' ')} (kerneltui gc, or the workspace's dumps budget)"
            self.view.set_lines([Text(f"The dumps of {self.version.get('name', 'this version')} were {why}.")])
            return
        if not kernels:
            status = self.version.get("status")
            why = "still being judged" if status in ("queued", "running") else "no compiled kernels were dumped"
            self.generation += 1  # a listing still being read is not shown over this
            self.view.set_lines(
                [Text(f"No PTX/SASS for {self.version.get('name', 'this version')}: {why}.", style="dim")]
            )
            return
        self._load(self._request(kernels[self.kernel_index]))

    def _request(self, kernel: str) -> Listing:
        """What to show, taken on the UI thread: the reading thread never looks at the pane."""
        self.generation += 1
        theirs = self.paired_kernel(kernel)
        return Listing(
            generation=self.generation,
            kernel=kernel,
            kind=self.kind,
            comparing=self.comparing,
            files={a["kind"]: a["path"] for a in self.artifacts if a["kernel"] == kernel},
            theirs={a["kind"]: a["path"] for a in self.compare_artifacts if a["kernel"] == theirs},
            their_kernel=theirs or kernel,
            compare_name=self.compare_name,
            version_name=str(self.version.get("name")),
            version_path=self.version.get("path") or "",
            source=self.source,
        )

    @work(thread=True, exclusive=True, group="asm")
    def _load(self, listing: Listing) -> None:
        """Reading and colouring a listing can take a while for big kernels: never on the UI thread."""
        lines = listing.lines()
        self.app.call_from_thread(self._show_listing, listing.generation, lines)

    def _show_listing(self, generation: int, lines: list[Text]) -> None:
        self.listings_read += 1
        if generation == self.generation:  # a listing asked for since wins, whichever thread ends last
            self.view.set_lines(lines)

    def action_kernel(self, step: int) -> None:
        kernels = self.kernels()
        if kernels:
            self.kernel_index = (self.kernel_index + step) % len(kernels)
            self.reload()

    def action_kind(self) -> None:
        kinds = kinds_of(self.artifacts)
        self.kind = kinds[(kinds.index(self.kind) + 1) % len(kinds)] if self.kind in kinds else "sass"
        self.comparing = False
        self.reload()

    def action_compare(self) -> None:
        self.comparing = not self.comparing
        self.reload()
