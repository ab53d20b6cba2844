"""KernelBench problems in and out: `kerneltui import kernelbench FILE|DIR`, `kerneltui export P --format kernelbench`.

A KernelBench file defines `class Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`, with module
constants (`batch_size = 16`) setting the sizes. Imported, it becomes <workspace>/<name>/problem.py beside a
copy of the file, which problem.py loads as it is through harness.problem.kernelbench (how seeds, weights and ModelNew
versions work is said there). `--set NAME=VALUE` sets a module constant for the correctness cases, and the
constants computed from it follow (`bias_shape = (out_features,)`); the benchmark case keeps the file's own sizes.
The file's code runs at import in a contained process (formats.contained), never in kerneltui's.

Exported, a version becomes a KernelBench submission: a file defining `ModelNew`. A version defining ModelNew is
written as it is; one defining custom_kernel(*inputs, model) gets a ModelNew that subclasses the problem's
Model (so it is built, and seeded, as Model is and holds the same parameters) and calls it.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from kerneltui.core.workspace import LOOKS_LIKE_VERSION, VERSION_RE, WorkspaceError, resolve
from kerneltui.formats.constants import ConstantRefused, Unknown, evaluate
from kerneltui.formats.contained import Bounds, add_arguments, bounds_of, run_problem_code, staged
from kerneltui.formats.safe_read import read_text

IMPORT_HELP = "a KernelBench problem file (Model, get_inputs, get_init_inputs), or a folder of them"
SOURCE_CONSTANT = "KERNELBENCH_SOURCE"  # in an imported problem.py: the file name of the original beside it
NEEDED = ("Model", "get_inputs", "get_init_inputs")


# --- import ------------------------------------------------------------------------------------------------


def import_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a module constant for the correctness cases, e.g. --set batch_size=16 (again for more); "
        "the benchmark case keeps the file's value; constants computed from it follow it",
    )
    add_arguments(parser)


def run_import(args: argparse.Namespace) -> int:
    source = Path(args.source).expanduser()
    if not source.exists():
        raise WorkspaceError(f"no such file or folder: {source}")
    files = _files_of(source)
    if len(files) > 1 and args.name:
        raise WorkspaceError("--name names one problem; importing a folder names each after its file")
    sets = parse_sets(args.set)
    bounds = bounds_of(args)
    unused = set(sets) - {n for f in files for n in _constant_names(f)}
    if unused:
        raise WorkspaceError(f"--set {', '.join(sorted(unused))}: no such module constant in {source}")
    into = target_workspace(args)
    failed = 0
    for path in files:
        try:
            folder = import_file(path, into, sets, name=args.name, force=args.force, bounds=bounds)
        except WorkspaceError as exc:
            if len(files) == 1:
                raise
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{path.name} -> {folder}")
    return 2 if failed else 0


def _files_of(source: Path) -> list[Path]:
    """The file named, or a folder's KernelBench files (a link among them is said and left out: it may lead
    anywhere)."""
    if not source.is_dir():
        return [source]
    files = []
    for path in sorted(source.glob("*.py")):
        if path.is_symlink():
            print(f"note: {path} is a symbolic link: not imported", file=sys.stderr)
        elif _looks_like_kernelbench(path):
            files.append(path)
    if not files:
        raise WorkspaceError(f"{source} holds no KernelBench files (*.py defining {', '.join(NEEDED)})")
    return files


def _constant_names(path: Path) -> set[str]:
    """The file's module constants; none where it cannot be read or is refused (import_file then says why)."""
    try:
        return set(file_constants(_read(path), where=path.name))
    except WorkspaceError:
        return set()


def _read(path: Path) -> str:
    return read_text(path, str(path))


def target_workspace(args: argparse.Namespace) -> Path:
    """--into W (made if need be), else the workspace the other commands would use, else ./kernels (made)."""
    if args.into:
        root = Path(args.into).expanduser()
        root.mkdir(parents=True, exist_ok=True)
        return root.resolve()
    try:
        return resolve(None).root
    except WorkspaceError:
        root = Path.cwd() / "kernels"
        root.mkdir(exist_ok=True)
        return root


def parse_sets(items: list[str]) -> dict[str, Any]:
    """["batch_size=16", "dims=(3, 5)"] -> {"batch_size": 16, "dims": (3, 5)}; a value that is no Python
    literal is a string."""
    sets: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise WorkspaceError(f"--set {item!r}: expected NAME=VALUE, e.g. --set batch_size=16")
        try:
            sets[name] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            sets[name] = text.strip()
    return sets


def file_constants(text: str, sets: dict[str, Any] | None = None, where: str = "the file") -> dict[str, Any]:
    """The module constants a KernelBench file assigns at its top level, with their values: literals, and
    arithmetic on literals and the constants above (`dim = 16 * 1024`), evaluated in order with bounds (an
    expression past them raises WorkspaceError naming it). `sets`: values given to some of them (--set), which the
    constants below follow (`bias_shape = (out_features,)`)."""
    sets = sets or {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    except (RecursionError, MemoryError, ValueError):
        raise WorkspaceError(f"{where}: nested too deep to read") from None
    found: dict[str, Any] = {}
    for node in tree.body:
        for name, value in _assigned(node):
            if name in sets:
                found[name] = sets[name]
                continue
            try:
                found[name] = evaluate(value, found)
            except Unknown:
                found.pop(name, None)  # assigned again, to something this does not evaluate: not a constant here
            except ConstantRefused as exc:
                shown = ast.unparse(value)
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                raise WorkspaceError(f"{where}: module constant {name} = {shown}: {exc}; refused") from None
    return found


def _assigned(node: ast.stmt) -> list[tuple[str, ast.expr]]:
    """(name, value) for a top-level `name = value` (or annotated), names starting with '_' left out."""
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
        return []
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [(t.id, node.value) for t in targets if isinstance(t, ast.Name) and not t.id.startswith("_")]


def unfollowed(text: str, changed: set[str]) -> list[str]:
    """Constants computed from one `changed` (by --set) in a way file_constants does not evaluate (a call): they
    keep the file's value in the correctness case."""
    found: list[str] = []
    for node in ast.parse(text).body:
        for name, value in _assigned(node):
            uses = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
            if uses & changed and name not in changed:
                found.append(name)
    return found


def _looks_like_kernelbench(path: Path) -> bool:
    try:
        tree = ast.parse(_read(path))
    except (WorkspaceError, SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    return set(NEEDED) <= defined


def problem_name(stem: str) -> str:
    """'19_ReLU' stays; characters a folder name should not hold become '_'."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem).strip("_.")
    if not name:
        raise WorkspaceError(f"{stem!r} makes no problem name; pass --name")
    return name


def import_file(
    path: Path,
    into: Path,
    sets: dict[str, Any],
    name: str | None = None,
    force: bool = False,
    bounds: Bounds | None = None,
) -> Path:
    """Writes <into>/<name>/problem.py and a copy of `path`, whole or not at all; checks, running the file in a
    contained process, that the problem loads, its inputs, weights and cost can be made (shapes only) and its
    Model's forward pass runs on the correctness case. Returns the problem folder."""
    text = _read(path)
    constants = file_constants(text, where=path.name)
    own = {k: v for k, v in sets.items() if k in constants}
    small = file_constants(text, own, where=path.name)
    changed = {k for k in small if small[k] != constants.get(k)}
    for stale in unfollowed(text, changed):
        print(
            f"note: {path.name}: {stale} is computed from {', '.join(sorted(changed))} in a way the import does "
            "not evaluate: it keeps the file's value in the correctness case (--set it too)",
            file=sys.stderr,
        )
    name = problem_name(name or path.stem)
    folder = into / name
    if (folder / "problem.py").exists() and not force:
        raise WorkspaceError(f"{folder} already holds a problem; --force writes over it")
    copy_name = (
        path.name if not (VERSION_RE.match(path.name) or LOOKS_LIKE_VERSION.match(path.name)) else f"kb_{path.name}"
    )
    if copy_name == "problem.py":
        copy_name = "kernelbench_problem.py"
    with staged(folder, force=True) as stage:  # a folder there without a problem.py is written into, as before
        (stage / copy_name).write_text(text)
        (stage / "problem.py").write_text(problem_text(path, text, copy_name, constants, small, own))
        try:
            checked = check_problem(stage, path.name, bounds or Bounds(), shown_as=folder)
        except WorkspaceError as exc:
            if own or not any(word in str(exc) for word in ("ran past", "memory", "killed")):
                raise
            raise WorkspaceError(f"{exc}; its forward pass ran at the file's own sizes: --set smaller ones") from None
    biggest = max(checked.get("case_elements") or [0])
    if not own and biggest > INTERPRETER_ELEMENTS:
        print(
            f"warning: {path.name}: its correctness case has {biggest:,} input elements at the file's own sizes: with "
            "no GPU, Triton's interpreter takes minutes or more on it (--set smaller sizes, e.g. --set batch_size=16)",
            file=sys.stderr,
        )
    return folder


INTERPRETER_ELEMENTS = 1 << 22  # input elements past which a correctness case is slow in Triton's interpreter


def problem_text(
    path: Path, text: str, copy_name: str, constants: dict[str, Any], small: dict[str, Any], sets: dict[str, Any]
) -> str:
    where = (
        "correctness at " + ", ".join(f"{k}={v!r}" for k, v in sets.items()) + " (--set), timing at the file's sizes"
        if sets
        else "correctness and timing at the file's own sizes (--set NAME=VALUE on import sets smaller ones)"
    )
    summary = _model_summary(text) or "a KernelBench problem"
    return f'''"""KernelBench {path.stem}: {summary}

Imported from {path.name} by `kerneltui import kernelbench`; {copy_name} beside this file is that file, loaded
as it is (harness.problem.kernelbench). Inputs: get_inputs()'s, then the model input
{{"init_inputs": [...], "state_dict": {{name: tensor}}}}: the weights of a Model built under each seed. A version
defines custom_kernel(*inputs, model), or KernelBench's class ModelNew (built as ModelNew(*init_inputs), given
the reference's weights by name, called as forward(*inputs)). Cases set the file's module constants:
{where}.
"""

from pathlib import Path

from harness.problem import kernelbench
{SOURCE_CONSTANT} = {copy_name!r}
source = kernelbench.Source(Path(__file__).with_name({SOURCE_CONSTANT}))

cases = [{small!r}]
bench_cases = [{constants!r}]
tolerance = kernelbench.TOLERANCE  # KernelBench's: atol = rtol = 1e-4 for float32, 1e-2 for float16/bfloat16


def make_inputs(case, seed, device):
    return source.make_inputs(case, seed, device)


def reference(*inputs):
    return source.reference(*inputs)


def cost(case):
    return source.cost(case)
'''


def _model_summary(text: str) -> str:
    """The first line of Model's docstring."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return ""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            doc = ast.get_docstring(node) or ""
            first = doc.strip().splitlines()[0].strip() if doc.strip() else ""
            return first.replace('"""', "'''")
    return ""


def check_problem(folder: Path, what: str, bounds: Bounds, shown_as: Path | None = None) -> dict[str, Any]:
    """The problem loads; every case's inputs and weights build (shape-only, on the meta device), cost works,
    and the forward pass runs on each correctness case (on the CPU): a broken file is said now, not in the
    middle of a version's judgement. Run contained (formats.contained), as it runs the file's code. Needs torch
    here; without it, the check is left to the first evaluation."""
    if importlib.util.find_spec("torch") is None:
        print(f"note: no torch in this Python: {folder.name} is not checked until it is judged", file=sys.stderr)
        return {}
    return run_problem_code(folder, "kernelbench", what, bounds, shown_as=shown_as)


# --- export ------------------------------------------------------------------------------------------------


def export_version(problem_dir: Path, version_path: Path) -> str:
    """The version as a KernelBench submission (a file defining ModelNew)."""
    text = version_path.read_text()
    tree = _parse(text, version_path)
    if any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        return text
    if not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "custom_kernel" for n in tree.body):
        raise WorkspaceError(f"{version_path.name} defines neither custom_kernel nor ModelNew")
    original = kernelbench_source(problem_dir)
    model_text = original.read_text()
    futures, model_body = _split_futures(model_text)
    version_futures, version_body = _split_futures(text)
    header = "".join(sorted(set(futures + version_futures)))
    return f'''{header}# KernelBench submission: {problem_dir.name} {version_path.stem}, from kerneltui's workspace.
# The problem's Model ({original.name}) comes first: ModelNew subclasses it, so it is built (and seeded) as Model
# is and holds the same parameters under the same names; its forward is the version's custom_kernel.

{model_body.strip()}


_KernelBenchModel = Model

# --- {version_path.name} ---

{version_body.strip()}


_custom_kernel = custom_kernel
del custom_kernel


class ModelNew(_KernelBenchModel):
    """Model's parameters and buffers, computed with {version_path.stem}'s custom_kernel(*inputs, model)."""

    def __init__(self, *init_inputs):
        super().__init__(*init_inputs)
        self._kerneltui_init_inputs = list(init_inputs)

    def forward(self, *inputs):
        model = {{"init_inputs": self._kerneltui_init_inputs, "state_dict": dict(self.state_dict())}}
        return _custom_kernel(*inputs, model)
'''


def kernelbench_source(problem_dir: Path) -> Path:
    """The KernelBench file an imported problem.py loads (its KERNELBENCH_SOURCE)."""
    problem = problem_dir / "problem.py"
    tree = _parse(problem.read_text(), problem)
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == SOURCE_CONSTANT for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            path = problem_dir / node.value.value
            if not path.is_file():
                raise WorkspaceError(f"{problem_dir.name}: {path.name} (its KernelBench file) is missing")
            return path
    raise WorkspaceError(
        f"{problem_dir.name} was not imported from KernelBench (its problem.py names no {SOURCE_CONSTANT}): a "
        "submission needs the problem's Model; a version defining ModelNew exports as it is"
    )


def _parse(text: str, path: Path) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError as exc:
        raise WorkspaceError(f"{path}:{exc.lineno}: SyntaxError: {exc.msg}") from None


def _split_futures(text: str) -> tuple[list[str], str]:
    """(`from __future__` lines, the rest): the lines must open the file the texts are joined into."""
    futures: list[str] = []
    rest: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("from __future__ import"):
            futures.append(line if line.endswith("\n") else line + "\n")
        else:
            rest.append(line)
    return futures, "".join(rest)
