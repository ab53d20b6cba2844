"""What the commands share: exit statuses, and the options several take, said the same way in each.

Imported for every command, `kerneltui --help` included: nothing heavy here (no config models, no judge).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Protocol

from kerneltui.core.workspace import WorkspaceError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
CONFIG_HELP = "a config file (default: $XDG_CONFIG_HOME/kerneltui/config.toml)"
WORKSPACE_HELP = "the folder of problem folders (default: ., else ./kernels)"
VERSION_HELP = "kernels/<problem>/vNNN.py"
# eval, profile, approve and reject take --workspace so scripts can pass it to every command alike
IGNORED_WORKSPACE_HELP = "ignored: the workspace is the version's grandparent folder"


class Subparsers(Protocol):
    """Where a command family adds its commands: entry.Commands, which keeps their names."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


def add_config(parser: argparse.ArgumentParser, text: str = CONFIG_HELP) -> None:
    parser.add_argument("--config", help=text)


def add_workspace(parser: argparse.ArgumentParser, text: str | None = WORKSPACE_HELP) -> None:
    parser.add_argument("--workspace", help=text)


def add_workspace_folder(parser: argparse.ArgumentParser) -> None:
    """The dashboard's workspace: the folder after the command, as `kerneltui WORKSPACE` gives it, or --workspace
    as every other command takes it (workspace_given reads either)."""
    parser.add_argument("workspace_folder", nargs="?", metavar="workspace")
    add_workspace(parser)


def workspace_given(args: argparse.Namespace) -> str | None:
    """The workspace add_workspace_folder's options name, if any; both may name it, but not two folders."""
    folder, option = args.workspace_folder, args.workspace
    if folder and option and Path(folder).resolve() != Path(option).resolve():
        raise WorkspaceError(f"two workspaces given: {folder} and --workspace {option}; pass one")
    return folder or option


def add_json(parser: argparse.ArgumentParser, text: str | None) -> None:
    parser.add_argument("--json", action="store_true", help=text)


def add_executor(parser: argparse.ArgumentParser) -> None:
    """--executor, read by kerneltui.core.config.load_for over the config's [ladder] executor."""
    parser.add_argument(
        "--executor",
        action="append",
        help="where judges run (the config's [ladder] executor): local, ssh://[user@]host[:port][?gpus=0,1] "
        "(repeat for several), ray or ray://ADDRESS",
    )
