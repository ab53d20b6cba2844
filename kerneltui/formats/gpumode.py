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
import sys
from pathlib import Path
from typing import Any

from kerneltui.core.workspace import LOOKS_LIKE_VERSION, WorkspaceError
from kerneltui.formats.contained import Bounds, add_arguments, bounds_of, run_problem_code, staged
from kerneltui.formats.safe_read import inside, load_yaml, read_regular, read_text

IMPORT_HELP = "a GPU MODE reference-kernels problem folder (reference.py, task.yml, task.py, solutions/)"
TEMPLATE = Path(__file__).parent / "templates" / "gpumode_problem.py.txt"
NEEDED = ("ref_kernel", "generate_input", "check_implementation")
SKIPPED_FILES = ("eval.py", "submission.py")  # their harness and the submission: ours are the ladder and versions
SOLUTION_ORDER = ("correct", "wrong")
VERSION_FILES = ("task.py", "utils.py")  # what a submission may import beside it
OWN_FILES = ("problem.py",)  # written by the import: a files entry may not name them (nor a version's name)


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
    parser.add_argument(
        "--files-root",
        metavar="DIR",
        help="the folder task.yml's files may come from (default: the problem folder itself); GPU MODE's problems "
        "take utils.py from the folder above theirs: name that folder here to allow it",
    )
    add_arguments(parser)


def run_import(args: argparse.Namespace) -> int:
    into = Path(args.into) if args.into else _default_workspace()
    buffers = [parse_buffer(text) for text in getattr(args, "output_buffer", [])]
    files_root = Path(args.files_root) if getattr(args, "files_root", None) else None
    folder = import_problem(
        Path(args.source),
        into,
        name=args.name,
        force=args.force,
        buffers=buffers,
        files_root=files_root,
        bounds=bounds_of(args),
    )
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
    files_root: Path | None = None,
    bounds: Bounds | None = None,
) -> Path:
    """Writes `into`/<name>/ from the GPU MODE problem folder `source`, whole or not at all; returns the new
    problem folder. A source that is not one raises WorkspaceError saying what is missing. `buffers`: output
    buffers named by the person, beside those found (what ref_kernel returns or writes into). `files_root`: where
    task.yml's files may come from (the problem folder where not given). reference.py runs contained
    (formats.contained) within `bounds`."""
    source = source.expanduser().resolve()
    if not source.is_dir():
        raise WorkspaceError(f"{source}: no such folder (a GPU MODE problem folder holds reference.py and task.yml)")
    root = (files_root or source).expanduser().resolve()
    if source != root and root not in source.parents:
        raise WorkspaceError(f"--files-root {root}: must be the problem folder {source} or a folder above it")
    task, task_bytes = read_task(source), read_regular(source / "task.yml", str(source / "task.yml"))
    reference = _check_reference(source)
    files = _files_to_copy(source, task, root)
    files["reference.py"] = reference
    tests = _cases(task, "tests", source)
    benchmarks = _cases(task, "benchmarks", source, allow_empty=True)
    solutions = _solutions(source)
    name = name or source.name
    if not name.isidentifier() and not name.replace("-", "_").isidentifier():
        raise WorkspaceError(f"{name!r} is not a usable problem name: pass --name")
    target = into.expanduser().resolve() / name
    if target.exists() and not force:
        raise WorkspaceError(f"{target} exists already: pass --force to write over it, or --name for another")
    with staged(target, force) as stage:
        for dest, data in files.items():
            (stage / dest).write_bytes(data)
        (stage / "task.yml").write_bytes(task_bytes)
        description = str(task.get("description") or "").strip()
        _write_problem(stage, source, description, tests, benchmarks, [])
        found, note = probe_output_buffers(stage, bounds or Bounds(), target)
        named = [b for b in buffers or [] if b not in found]
        if found or named:
            _write_problem(stage, source, description, tests, benchmarks, found + named)
            if named:
                run_problem_code(stage, "load", "reference.py", bounds or Bounds(), shown_as=target)
        _write_versions(stage, source, solutions)
        _write_readme(stage, source, [(kind, path) for kind, path, _ in solutions], note)
    return target


def read_task(source: Path) -> dict[str, Any]:
    path = source / "task.yml"
    if not path.is_file() and not path.is_symlink():
        raise WorkspaceError(f"{source}: no task.yml (GPU MODE's format lists a problem's tests and benchmarks there)")
    task = load_yaml(path, str(path))
    if not isinstance(task, dict):
        raise WorkspaceError(f"{path}: must be a mapping with tests (and benchmarks)")
    return task


def _check_reference(source: Path) -> bytes:
    """reference.py's bytes, once it parses and defines what the format needs."""
    from harness.contract.source import defines

    path = source / "reference.py"
    if not path.is_file() and not path.is_symlink():
        raise WorkspaceError(f"{source}: no reference.py (it defines {', '.join(NEEDED)})")
    text = read_text(inside(source, "reference.py", str(path)), str(path))
    try:
        ast.parse(text)
    except SyntaxError as exc:
        raise WorkspaceError(f"{path}:{exc.lineno}: SyntaxError: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise WorkspaceError(f"{path}: nested too deep to read") from None
    missing = [n for n in NEEDED if not defines(text, n)]
    if missing:
        raise WorkspaceError(f"{path}: defines no {', '.join(missing)} (GPU MODE's format needs {', '.join(NEEDED)})")
    return text.encode()


def _files_to_copy(source: Path, task: dict[str, Any], root: Path) -> dict[str, bytes]:
    """task.yml's `files` (name -> its bytes, from a source relative to the problem folder), but for eval.py and
    the submission; without that list, task.py and utils.py from the folder (or the one above it, where that is
    inside `root`). Every file comes from inside `root`: no absolute path, no '..' out of it, no link."""
    listed = task.get("files")
    found: dict[str, bytes] = {}
    if isinstance(listed, list) and listed:
        for entry in listed:
            if not isinstance(entry, dict) or "name" not in entry or "source" not in entry:
                raise WorkspaceError(f"{source / 'task.yml'}: each of files must be {{name: ..., source: ...}}")
            dest, src = str(entry["name"]), str(entry["source"])
            if src.startswith("@") or dest in SKIPPED_FILES or Path(dest).name != dest or not dest.endswith(".py"):
                continue
            if dest in OWN_FILES or LOOKS_LIKE_VERSION.match(dest):
                raise WorkspaceError(f"{source / 'task.yml'}: files entry {dest}: a name the import writes itself")
            if dest != "reference.py":  # reference.py is the folder's own, read and checked above
                found[dest] = _listed_file(source, root, dest, src)
    else:
        for dest in ("task.py", "utils.py"):
            folders = [source] + ([source.parent] if source != root else [])
            for folder in folders:
                if (folder / dest).is_file() or (folder / dest).is_symlink():
                    found[dest] = read_regular(inside(root, str((folder / dest).relative_to(root)), dest), dest)
                    break
    return found


def _listed_file(source: Path, root: Path, dest: str, src: str) -> bytes:
    where = f"{source / 'task.yml'}: files entry {dest} (source {src!r})"
    relative = os.path.normpath(os.path.join(os.path.relpath(source, root), src)) if not os.path.isabs(src) else src
    try:
        path = inside(root, relative, where)
    except WorkspaceError as exc:
        hint = "; --files-root DIR lets them come from DIR (e.g. the folder above, for a shared utils.py)"
        raise WorkspaceError(str(exc) + (hint if root == source and ".." in src else "")) from None
    if not src.endswith(".py"):
        raise WorkspaceError(f"{where}: not a Python file: only .py files are copied")
    if not path.is_file() and not path.is_symlink():
        raise WorkspaceError(f"{where}: not there")
    return read_regular(path, where)


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


def probe_output_buffers(
    folder: Path, bounds: Bounds, shown_as: Path | None = None
) -> tuple[list[tuple[int | str, ...]], str | None]:
    """The tensors of `data` that ref_kernel returns or writes into (where it writes its output), on the first
    test's inputs, found by running reference.py contained (formats.problem_probe says how); with a note where
    they could not be made (a problem that needs a GPU)."""
    answer = run_problem_code(folder, "gpumode", "reference.py", bounds, shown_as=shown_as)
    buffers = answer.get("buffers")
    note = answer.get("note")
    if not isinstance(buffers, list) or not all(_buffer_path(b) for b in buffers):
        raise WorkspaceError("reference.py's probe answered something else than output buffers")
    return [tuple(b) for b in buffers], note if isinstance(note, str) else None


def _buffer_path(value: Any) -> bool:
    """[0, 2] or [0, "out", 1]: a path into make_inputs' (data,), as the probe answers it."""
    return (
        isinstance(value, list)
        and 1 < len(value) <= 32
        and all(isinstance(step, (int, str)) and not isinstance(step, bool) for step in value)
    )


def _solutions(source: Path) -> list[tuple[str, Path, bytes]]:
    """(what it is, file, its bytes): solutions/correct/, solutions/wrong/, then other folders; else
    submission.py. A link among them is refused: it may lead anywhere."""
    folder = source / "solutions"
    if folder.is_symlink():
        raise WorkspaceError(f"{folder}: a symbolic link: solutions come only from inside {source}")
    if not folder.is_dir():
        submission = source / "submission.py"
        if not submission.is_file() and not submission.is_symlink():
            return []
        return [("the example submission", submission, _solution_bytes(source, submission))]
    kinds = sorted((p for p in folder.iterdir() if p.is_dir() or p.is_symlink()), key=lambda p: (_rank(p.name), p.name))
    found = [(p.name, f) for p in kinds for f in sorted(_python_files(source, p))]
    found += [("a solution", f) for f in sorted(_python_files(source, folder))]
    return [(kind, path, _solution_bytes(source, path)) for kind, path in found]


def _python_files(source: Path, folder: Path) -> list[Path]:
    inside(source, str(folder.relative_to(source)), str(folder.relative_to(source)))
    return [p for p in folder.iterdir() if p.name.endswith(".py")]


def _solution_bytes(source: Path, path: Path) -> bytes:
    relative = str(path.relative_to(source))
    return read_regular(inside(source, relative, relative), relative)


def _rank(kind: str) -> int:
    return SOLUTION_ORDER.index(kind) if kind in SOLUTION_ORDER else len(SOLUTION_ORDER)


def _kind_text(kind: str) -> str:
    return {"correct": "a correct solution", "wrong": "a wrong solution"}.get(kind, kind)


def _write_versions(target: Path, source: Path, solutions: list[tuple[str, Path, bytes]]) -> None:
    for number, (kind, path, data) in enumerate(solutions, start=1):
        relative = path.relative_to(source)
        note = f'"""GPU MODE {relative}, as it was imported ({_kind_text(kind)}, by its folder)."""\n'
        (target / f"v{number:03d}.py").write_bytes(note.encode() + data)


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
    from harness.contract.source import defines

    text = version.read_text()
    if not defines(text, "custom_kernel"):
        raise WorkspaceError(f"{version}: defines no custom_kernel, so there is nothing to submit")
    problem_text = (problem_dir / "problem.py").read_text(errors="replace")
    if defines(problem_text, "GPUMODE_SOURCE"):
        return text
    return text.rstrip("\n") + "\n" + EXPORT_WRAPPER
