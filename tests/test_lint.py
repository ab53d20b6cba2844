"""The code stays ruff-clean, ruff-formatted and mypy-clean (all configured in pyproject.toml)."""

from __future__ import annotations

import ast
import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO, run


def test_ruff() -> None:
    done = run(["-m", "ruff", "check", "harness", "kerneltui", "agents", "tests", "benchmarks"])
    assert done.returncode == 0, done.stdout[-4000:]


def test_ruff_format() -> None:
    done = run(["-m", "ruff", "format", "--check", "harness", "kerneltui", "agents", "tests", "benchmarks"])
    assert done.returncode == 0, done.stdout[-4000:]


def test_mypy() -> None:
    done = run(["-m", "mypy"], timeout=900)
    assert done.returncode == 0, done.stdout[-4000:]


def test_import_contracts() -> None:
    """The layers in pyproject.toml's [tool.importlinter]: harness and agents stand alone, Textual only in the UI."""
    done = run(["-c", "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports())"])
    assert done.returncode == 0, done.stdout[-4000:]


# Packages a user's box may lack: CuTeDSL has no wheels for macOS or aarch64, TileLang (with TVM) is an extra.
OPTIONAL_DSLS = ("cutlass", "tilelang", "tvm", "tvm_ffi")


def imported_modules(folder: Path) -> set[str]:
    """Every module the code in `folder` imports, at the top or inside a function."""
    found: set[str] = set()
    for path in folder.rglob("*.py"):
        if "recordings" in path.parts:  # agents' recorded versions: data, not checked by mypy
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
    return found


def test_mypy_judges_the_code_alike_with_or_without_the_optional_dsls() -> None:
    """mypy runs once, here, where CuTeDSL is installed (and TileLang may be); it must say the same where they are
    not. So every module of theirs the code imports is typed as Any either way: an override with
    follow_imports = "skip" covers it (skip, installed; missing, ignore_missing_imports)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["ignore_missing_imports"] is True
    skipped = [
        pattern
        for override in config["overrides"]
        if override.get("follow_imports") == "skip"
        for pattern in override["module"]
    ]
    imported = set().union(*(imported_modules(REPO / folder) for folder in ("harness", "kerneltui", "agents")))
    optional = {m for m in imported if m.split(".")[0] in OPTIONAL_DSLS}
    assert "tilelang" in optional and any(m.startswith("cutlass.") for m in optional), optional  # it sees them
    uncovered = sorted(m for m in optional if not any(fnmatch.fnmatchcase(m, p) for p in skipped))
    assert not uncovered, f"typed differently where the package is missing: {uncovered}; add them to an override"


SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|PRAGMA\s)", re.S)


def test_no_sql_outside_the_history_package() -> None:
    """The history package is the one place that knows the tables: elsewhere, named queries only."""
    found = []
    for folder in ("kerneltui", "agents"):
        for path in (REPO / folder).rglob("*.py"):
            if "history" in path.relative_to(REPO).parts or path.name == "context_index.py":
                continue  # context_index.py: the search index, a database of its own that only it opens
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
                if isinstance(node, ast.Attribute) and node.attr == "conn":
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} (.conn)")
    assert not found, found


def test_no_class_over_300_lines() -> None:
    """Classes that grow past this are doing several jobs: split them by what they do."""
    long = []
    for folder in ("harness", "kerneltui", "agents"):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef) and node.end_lineno and node.end_lineno - node.lineno >= 300:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert not long, long


CLI_MODULE_LINES = 250
# argparse's private parts: the parser's list of actions, and the classes of its actions
ARGPARSE_PRIVATE = {"_actions", "_option_string_actions", "_subparsers", "_SubParsersAction", "_ActionsContainer"}


def test_no_cli_module_over_250_lines() -> None:
    """kerneltui/cli is a module per command family: one that grows past this holds several, split it."""
    long = []
    for path in sorted((REPO / "kerneltui" / "cli").rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > CLI_MODULE_LINES:
            long.append(f"{path.relative_to(REPO)}: {lines} lines")
    assert not long, long


def test_the_cli_uses_argparse_through_its_public_interface() -> None:
    """The commands' names come from the registry that adds them (kerneltui.cli.entry.Commands), not from
    argparse's internals, which may change in any Python release."""
    found = []
    for path in sorted((REPO / "kerneltui" / "cli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ARGPARSE_PRIVATE:
                found.append(f"{path.relative_to(REPO)}:{node.lineno} .{node.attr}")
    assert not found, found


def import_cycles(package: str) -> list[list[str]]:
    """Groups of modules of `package` that import each other, round a cycle (imports under TYPE_CHECKING and
    inside functions count: they tie the modules together all the same)."""
    import grimp  # import-linter's own graph of imports

    graph = grimp.build_graph(package, include_external_packages=False, cache_dir=None)  # a stale cache hid cycles
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in order:
            visit(module)
    return found


@pytest.mark.parametrize("package", ["harness", "kerneltui", "agents"])
def test_no_import_cycles(package: str) -> None:
    """Modules that import each other cannot be understood, tested or moved one at a time."""
    assert import_cycles(package) == []
