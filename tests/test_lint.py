"""The code stays ruff-clean, ruff-formatted and mypy-clean (all configured in pyproject.toml)."""

from __future__ import annotations

from tests.conftest import run


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
