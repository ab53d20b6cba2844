"""`kerneltui export PROBLEM --format F [--version V] [-o FILE]`: a version written as a submission in another
format; the best approved version (the fastest of those approved, else the newest approved) unless --version
names one.

Formats register here by name: each names a module defining `export_version(problem_dir, version_path) -> str`,
the submission's text (raise WorkspaceError where the version cannot be written in that format).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from kerneltui.cli.options import EXIT_OK, Subparsers, add_workspace
from kerneltui.core.workspace import Workspace, WorkspaceError, resolve

# format name -> the module implementing it (see the module docstring)
EXPORTERS: dict[str, str] = {
    "gpumode": "kerneltui.formats.gpumode",
    "kernelbench": "kerneltui.formats.kernelbench",
}


def chosen_version(workspace: Workspace, problem: str, version: str | None) -> Path:
    """--version v003 (or v003.py, or 3), else the best approved version of the problem."""
    folder = workspace.problem_dir(problem)
    if version is not None:
        stem = version.removesuffix(".py")
        stem = f"v{int(stem):03d}" if stem.isdigit() else stem
        path = folder / f"{stem}.py"
        if not path.is_file():
            known = ", ".join(p.stem for p in workspace.versions(problem)) or "none"
            raise WorkspaceError(f"{problem} has no version {version} (versions: {known})")
        return path
    from kerneltui.history.store import Store

    if not workspace.db_path.is_file():
        raise WorkspaceError(f"{problem}: nothing judged or approved yet in {workspace.root}; name one with --version")
    opened = Store.open(workspace.db_path)
    try:
        best = opened.store.best_approved(problem)
    finally:
        opened.store.close()
    if best is None or not best.get("path") or not Path(best["path"]).is_file():
        raise WorkspaceError(f"{problem}: no approved version; approve one (kerneltui approve) or pass --version")
    return Path(best["path"])


def run(args: argparse.Namespace) -> int:
    workspace = resolve(args.workspace)
    path = chosen_version(workspace, args.problem, args.version)
    module = importlib.import_module(EXPORTERS[args.format])
    text: str = module.export_version(workspace.problem_dir(args.problem), path)
    if args.output and args.output != "-":
        Path(args.output).write_text(text)
        print(f"{args.problem} {path.stem} -> {args.output} ({args.format})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """`kerneltui export`."""
    parser = subparsers.add_parser(
        "export", help="a version as a submission in another format (" + ", ".join(EXPORTERS) + ")"
    )
    parser.add_argument("problem", help="the problem's folder name")
    parser.add_argument("--format", required=True, choices=sorted(EXPORTERS), help="the submission's format")
    parser.add_argument("--version", help="the version to export, e.g. v003 (default: the best approved one)")
    parser.add_argument("-o", "--output", help="the file to write (default: stdout)")
    add_workspace(parser)
    parser.set_defaults(func=run)
    return parser
