"""The code stays ruff-clean, ruff-formatted and mypy-clean (all configured in pyproject.toml)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

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


def test_mypy_without_cutedsl(tmp_path: Path) -> None:
    """mypy is clean where nvidia-cutlass-dsl is not installed (macOS, aarch64 GPU hosts), nor TileLang (an
    extra): this environment's packages but theirs, seen through a second interpreter."""
    site = Path(sysconfig.get_paths()["purelib"])
    bare = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = bare / "bin" / "python"
    target = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    for entry in site.iterdir():
        if not any(dsl in entry.name.lower() for dsl in ("cutlass", "tilelang", "tvm")):
            (target / entry.name).symlink_to(entry)
    done = run(["-m", "mypy", "--python-executable", str(python)], timeout=900)
    assert done.returncode == 0, done.stdout[-4000:]


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
