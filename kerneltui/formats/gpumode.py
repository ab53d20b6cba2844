"""GPU MODE's reference-kernels format, imported and exported.

A problem folder there holds reference.py (`ref_kernel(data)`, `generate_input(**test)`, with the test's `seed`
among its arguments, and `check_implementation(data, output)`, answering '' or a message, or a pair (ok,
message)), task.py (the types a submission imports), task.yml (`tests` and `benchmarks`: lists of
generate_input's keyword arguments; `files`: where utils.py and the others come from) and solutions/ (submissions
defining `custom_kernel(data)`, sorted into correct/ and wrong/).

Imported, it becomes a workspace problem: those files copied beside a problem.py that maps them onto the native
format (kerneltui/formats/templates/gpumode_problem.py.txt says how), its solutions the versions v001.py... in
the order correct/, wrong/, then any other folder, each with a first line saying which it was (README.md in the
problem folder lists them). Exported, a version becomes a submission.py with `custom_kernel(data)`.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from kerneltui.core.workspace import WorkspaceError

IMPORT_HELP = "a GPU MODE reference-kernels problem folder (reference.py, task.yml, task.py, solutions/)"
TEMPLATE = Path(__file__).parent / "templates" / "gpumode_problem.py.txt"
NEEDED = ("ref_kernel", "generate_input", "check_implementation")
SKIPPED_FILES = ("eval.py", "submission.py")  # their harness and the submission: ours are the ladder and versions
SOLUTION_ORDER = ("correct", "wrong")
VERSION_FILES = ("task.py", "utils.py")  # what a submission may import beside it


def import_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output-buffer",
        action="append",
        default=[],
        metavar="PATH",
        help="a tensor of data that submissions write their output into, where ref_kernel neither returns nor "
        "writes it: its index in data's tuple (2) or its key in data's dict (out), dotted for nested ones "
        "(1.out); repeat for several",
    )


def run_import(args: argparse.Namespace) -> int:
    into = Path(args.into) if args.into else _default_workspace()
    buffers = [parse_buffer(text) for text in getattr(args, "output_buffer", [])]
    folder = import_problem(Path(args.source), into, name=args.name, force=args.force, buffers=buffers)
    print(f"{folder.name}: imported into {folder} ({len(list(folder.glob('v*.py')))} version(s))")
    sys.stdout.flush()
    for note in _notes(folder):
        print(f"note: {note}", file=sys.stderr)
    return 0


def _default_workspace() -> Path:
    from kerneltui.core.workspace import resolve

    try:
        return resolve(None).root
    except WorkspaceError:
        return Path("kernels")


def parse_buffer(text: str) -> tuple[int | str, ...]:
    """'2' -> (0, 2): data[2]; 'out' -> (0, 'out'); '1.out' -> (0, 1, 'out') (paths into make_inputs' (data,))."""
    steps = [int(step) if step.isdigit() else step for step in text.split(".")]
    if not text or not all(steps):
        raise WorkspaceError(f"--output-buffer {text!r}: give an index or a key of data, dotted for nested ones")
    return (0, *steps)


def import_problem(
    source: Path,
    into: Path,
    name: str | None = None,
    force: bool = False,
    buffers: list[tuple[int | str, ...]] | None = None,
) -> Path:
    """Writes `into`/<name>/ from the GPU MODE problem folder `source`; returns the new problem folder. A source
    that is not one raises WorkspaceError saying what is missing. `buffers`: output buffers named by the person,
    beside those found (what ref_kernel returns or writes into)."""
    source = source.expanduser().resolve()
    if not source.is_dir():
        raise WorkspaceError(f"{source}: no such folder (a GPU MODE problem folder holds reference.py and task.yml)")
    task = read_task(source)
    _check_reference(source)
    files = _files_to_copy(source, task)
    name = name or source.name
    if not name.isidentifier() and not name.replace("-", "_").isidentifier():
        raise WorkspaceError(f"{name!r} is not a usable problem name: pass --name")
    target = into.expanduser().resolve() / name
    if target.exists() and not force:
        raise WorkspaceError(f"{target} exists already: pass --force to write over it, or --name for another")
    target.mkdir(parents=True, exist_ok=True)
    for dest, src in files.items():
        shutil.copyfile(src, target / dest)
    shutil.copyfile(source / "task.yml", target / "task.yml")
    tests = _cases(task, "tests", source)
    benchmarks = _cases(task, "benchmarks", source, allow_empty=True)
    description = str(task.get("description") or "").strip()
    _write_problem(target, source, description, tests, benchmarks, [])
    found, note = probe_output_buffers(target)
    named = [b for b in buffers or [] if b not in found]
    if found or named:
        _write_problem(target, source, description, tests, benchmarks, found + named)
        if named:
            _check_loads(target)
    solutions = _solutions(source)
    _write_versions(target, source, solutions)
    _write_readme(target, source, solutions, note)
    return target


def read_task(source: Path) -> dict[str, Any]:
    import yaml

    path = source / "task.yml"
    if not path.is_file():
        raise WorkspaceError(f"{source}: no task.yml (GPU MODE's format lists a problem's tests and benchmarks there)")
    try:
        task = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise WorkspaceError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(task, dict):
        raise WorkspaceError(f"{path}: must be a mapping with tests (and benchmarks)")
    return task


def _check_reference(source: Path) -> None:
    from harness.source import defines

    path = source / "reference.py"
    if not path.is_file():
        raise WorkspaceError(f"{source}: no reference.py (it defines {', '.join(NEEDED)})")
    text = path.read_text(errors="replace")
    try:
        ast.parse(text)
    except SyntaxError as exc:
        raise WorkspaceError(f"{path}:{exc.lineno}: SyntaxError: {exc.msg}") from None
    missing = [n for n in NEEDED if not defines(text, n)]
    if missing:
        raise WorkspaceError(f"{path}: defines no {', '.join(missing)} (GPU MODE's format needs {', '.join(NEEDED)})")


def _files_to_copy(source: Path, task: dict[str, Any]) -> dict[str, Path]:
    """task.yml's `files` (name -> source, relative to the problem folder), but for eval.py and the submission;
    without that list, reference.py, task.py and utils.py from the folder or the one above it."""
    listed = task.get("files")
    found: dict[str, Path] = {}
    if isinstance(listed, list) and listed:
        for entry in listed:
            if not isinstance(entry, dict) or "name" not in entry or "source" not in entry:
                raise WorkspaceError(f"{source / 'task.yml'}: each of files must be {{name: ..., source: ...}}")
            dest, src = str(entry["name"]), str(entry["source"])
            if src.startswith("@") or dest in SKIPPED_FILES or Path(dest).name != dest or not dest.endswith(".py"):
                continue
            path = (source / src).resolve()
            if not path.is_file():
                raise WorkspaceError(f"{source / 'task.yml'}: files names {src} for {dest}, which is not there")
            found[dest] = path
    else:
        for dest in ("reference.py", "task.py", "utils.py"):
            for candidate in (source / dest, source.parent / dest):
                if candidate.is_file():
                    found[dest] = candidate
                    break
    found.setdefault("reference.py", source / "reference.py")
    return found


def _cases(task: dict[str, Any], key: str, source: Path, allow_empty: bool = False) -> list[dict[str, Any]]:
    """task.yml's tests or benchmarks, their seeds dropped (the judge gives fresh ones), duplicates once."""
    value = task.get(key) or []
    where = f"{source / 'task.yml'}: {key}"
    if not isinstance(value, list) or not all(isinstance(c, dict) for c in value):
        raise WorkspaceError(f"{where} must be a list of generate_input's arguments, e.g. {{size: 1024, seed: 5}}")
    if not value and not allow_empty:
        raise WorkspaceError(f"{where} is empty: correctness needs at least one test")
    cases: list[dict[str, Any]] = []
    for case in value:
        kept = {str(k): v for k, v in case.items() if k != "seed"}
        if not all(_plain(v) for v in kept.values()):
            raise WorkspaceError(f"{where}: {case} holds a value that is not a number, a string, a bool or a list")
        if kept not in cases:
            cases.append(kept)
    return cases


def _plain(value: Any) -> bool:
    """What a case's value may be: what repr writes back as it was (a number, a string, a bool, lists of them)."""
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return isinstance(value, (int, float, str, bool))


def _write_problem(
    target: Path,
    source: Path,
    description: str,
    tests: list[dict[str, Any]],
    benchmarks: list[dict[str, Any]],
    buffers: list[tuple[int | str, ...]],
) -> None:
    lines = description.splitlines() or [f"{target.name}, a GPU MODE problem"]
    title = lines[0].strip().rstrip(".") + "."
    rest = "\n".join(lines[1:]).strip()
    text = TEMPLATE.read_text().format(
        title=_docstring_safe(title),
        description=f"\n{_docstring_safe(rest)}\n" if rest else "",
        source=str(source),
        cases=_listing(tests),
        bench_cases=_listing(benchmarks),
        version_files=repr(sorted(n for n in os.listdir(target) if n in VERSION_FILES)),
        output_buffers=repr(buffers) + ("  # (0, ...): inside data, custom_kernel's one argument" if buffers else ""),
    )
    (target / "problem.py").write_text(text)


def _docstring_safe(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'''", '"""')


def _listing(cases: list[dict[str, Any]]) -> str:
    if not cases:
        return "[]"
    return "[\n" + "".join(f"    {case!r},\n" for case in cases) + "]"


def _check_loads(target: Path) -> Any:
    from harness.problem import ProblemError, load_problem

    try:
        problem = load_problem(target)
    except ProblemError as exc:
        raise WorkspaceError(f"the imported problem does not load: {exc}") from None
    return problem


def probe_output_buffers(target: Path) -> tuple[list[tuple[int | str, ...]], str | None]:
    """The tensors of `data` that ref_kernel returns or writes into (where it writes its output), on the first
    test's inputs made here; with a note where they could not be made (a problem that needs a GPU)."""
    import torch

    problem = _check_loads(target)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        (data,) = problem.make_inputs(dict(problem.cases[0]), 1, device)
        before = [(path, leaf.clone()) for path, leaf in _leaves(data, ())]
        output = problem.reference(data)
    except Exception as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if device.type != "cuda" and "cuda" in text.lower():  # made here with no GPU, or its reference needs one
            return [], f"it needs a GPU ({text}); its output buffers were not probed: name them with --output-buffer"
        raise WorkspaceError(f"{target.name}: the first test's inputs and reference failed here: {text}") from None
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    pointers = {t.data_ptr() for t in outputs if isinstance(t, torch.Tensor) and t.numel()}
    found = []
    for (path, leaf), (_, was) in zip(_leaves(data, ()), before, strict=True):
        written = bool(leaf.numel()) and not torch.equal(_bytes(leaf), _bytes(was))
        if written or (leaf.numel() and leaf.data_ptr() in pointers):
            found.append((0, *path))
    shapes = {tuple(t.shape) for t in outputs if isinstance(t, torch.Tensor)}
    alike = [path for path, leaf in _leaves(data, ()) if tuple(leaf.shape) in shapes] if not found else []
    if alike and len(list(_leaves(data, ()))) > 1:  # a buffer the reference leaves alone, perhaps: asked, not guessed
        named = " or ".join(".".join(str(step) for step in path) for path in alike)
        return found, (
            f"ref_kernel returns a new tensor, and data holds tensors of its shape ({named}): submissions may write "
            "their output into one ref_kernel never reads and return it; for ones that return None, import again "
            f"with --output-buffer {named.split(' or ')[-1]} (or the one it is)"
        )
    return found, None


def _bytes(tensor: Any) -> Any:
    import torch

    return tensor.detach().contiguous().view(-1).view(torch.uint8)


def _leaves(value: Any, path: tuple[int | str, ...]) -> list[tuple[tuple[int | str, ...], Any]]:
    import torch

    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, (list, tuple)):
        return [leaf for i, item in enumerate(value) for leaf in _leaves(item, (*path, i))]
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, (*path, str(key)))]
    return []


def _solutions(source: Path) -> list[tuple[str, Path]]:
    """(what it is, file): solutions/correct/, solutions/wrong/, then other folders; else submission.py."""
    folder = source / "solutions"
    if not folder.is_dir():
        return [("the example submission", source / "submission.py")] if (source / "submission.py").is_file() else []
    kinds = sorted((p for p in folder.iterdir() if p.is_dir()), key=lambda p: (_rank(p.name), p.name))
    found = [(p.name, f) for p in kinds for f in sorted(p.glob("*.py"))]
    found += [("a solution", f) for f in sorted(folder.glob("*.py"))]
    return found


def _rank(kind: str) -> int:
    return SOLUTION_ORDER.index(kind) if kind in SOLUTION_ORDER else len(SOLUTION_ORDER)


def _kind_text(kind: str) -> str:
    return {"correct": "a correct solution", "wrong": "a wrong solution"}.get(kind, kind)


def _write_versions(target: Path, source: Path, solutions: list[tuple[str, Path]]) -> None:
    for number, (kind, path) in enumerate(solutions, start=1):
        relative = path.relative_to(source)
        note = f'"""GPU MODE {relative}, as it was imported ({_kind_text(kind)}, by its folder)."""\n'
        (target / f"v{number:03d}.py").write_text(note + path.read_text())


def _write_readme(target: Path, source: Path, solutions: list[tuple[str, Path]], note: str | None) -> None:
    lines = [
        f"# {target.name}",
        "",
        f"Imported from the GPU MODE problem folder {source} by `kerneltui import gpumode`.",
        "reference.py, task.py, utils.py and task.yml are its own; problem.py maps them onto kerneltui's format.",
        "",
        "| version | imported from | kind |",
        "|---|---|---|",
    ]
    for number, (kind, path) in enumerate(solutions, start=1):
        lines.append(f"| v{number:03d}.py | {path.relative_to(source)} | {_kind_text(kind)} |")
    if note:
        lines += ["", f"Note: {note}."]
    (target / "README.md").write_text("\n".join(lines) + "\n")


def _notes(folder: Path) -> list[str]:
    text = (folder / "README.md").read_text()
    return [line.removeprefix("Note: ") for line in text.splitlines() if line.startswith("Note: ")]


EXPORT_WRAPPER = """

# GPU MODE's entry point: custom_kernel(data), data holding the inputs this version takes one by one.
_custom_kernel_of_inputs = custom_kernel


def custom_kernel(data):
    return _custom_kernel_of_inputs(*(data if isinstance(data, (tuple, list)) else (data,)))
"""


def export_version(problem_dir: Path, version: Path) -> str:
    """The version as a GPU MODE submission: as it is for a problem imported from GPU MODE (it takes `data`
    already), else with a custom_kernel(data) that passes data's items to the version's custom_kernel."""
    from harness.source import defines

    text = version.read_text()
    if not defines(text, "custom_kernel"):
        raise WorkspaceError(f"{version}: defines no custom_kernel, so there is nothing to submit")
    problem_text = (problem_dir / "problem.py").read_text(errors="replace")
    if defines(problem_text, "GPUMODE_SOURCE"):
        return text
    return text.rstrip("\n") + "\n" + EXPORT_WRAPPER
