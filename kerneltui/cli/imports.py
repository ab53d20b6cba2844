"""`kerneltui import FORMAT SOURCE [--into W]`: a problem held in another format becomes a workspace problem
(a native problem.py beside the format's own files, its solutions as versions).

Formats register here by name: each names a module defining
- `IMPORT_HELP`: one line for `kerneltui import --help`;
- `import_arguments(parser)` (optional): arguments beyond SOURCE and --into;
- `run_import(args) -> int`: the command (exit 0 when imported, 2 on a bad source: raise WorkspaceError).
The module is imported only when its format is named, so a format's dependencies cost the others nothing.
What is imported is hostile until judged: a format reads its files through formats.safe_read (only from inside
the source, bounded) and runs the problem's own code only through formats.contained (a contained worker process,
no secret, bounded), building the problem folder with formats.contained.staged (in place only when whole).
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from kerneltui.cli.options import Subparsers

# format name -> the module implementing it (see the module docstring)
IMPORTERS: dict[str, str] = {
    "gpumode": "kerneltui.formats.gpumode",
    "kernelbench": "kerneltui.formats.kernelbench",
}
HELPS: dict[str, str] = {
    "gpumode": "a GPU MODE reference-kernels problem folder (reference.py, task.yml, task.py, solutions/)",
    "kernelbench": "a KernelBench problem file (Model, get_inputs, get_init_inputs), or a folder of them",
}


def run(args: argparse.Namespace) -> int:
    module = importlib.import_module(IMPORTERS[args.format])
    code: int = module.run_import(args)
    return code


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """`kerneltui import`, a subcommand per format."""
    parser = subparsers.add_parser(
        "import", help="a problem in another format (" + ", ".join(IMPORTERS) + ") as a workspace problem"
    )
    sub = parser.add_subparsers(dest="format", required=True)
    for name in IMPORTERS:
        one = sub.add_parser(name, help=HELPS.get(name, name))
        one.add_argument("source", help="the problem to import (a folder or a file, as the format has it)")
        one.add_argument("--into", help="the workspace to write it into (default: ., else ./kernels)")
        one.add_argument("--name", help="the problem's folder name in the workspace (default: the source's)")
        one.add_argument("--force", action="store_true", help="write over a problem folder of that name")
        arguments = _arguments(name)
        if arguments is not None:
            arguments(one)
        one.set_defaults(func=run)
    return parser


def _arguments(name: str) -> Any:
    """A format's extra arguments, where its module is importable without its dependencies."""
    try:
        module = importlib.import_module(IMPORTERS[name])
    except ImportError:
        return None
    return getattr(module, "import_arguments", None)
