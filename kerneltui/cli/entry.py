"""The `kerneltui` command's parser, built from each command family's module, and main: the dashboard by default,
a headless subcommand for scripts otherwise."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kerneltui.cli import (
    agent,
    bench,
    checks,
    config,
    context,
    custody,
    dashboard,
    evaluate,
    export,
    gc,
    imports,
    mcp,
    verdicts,
    workspace,
)
from kerneltui.cli.options import EXIT_USAGE, Subparsers
from kerneltui.cli.streams import flush_stdout, printable_output, reader_gone
from kerneltui.core.config_error import ConfigError
from kerneltui.core.workspace import WorkspaceError
from kerneltui.history.schema import HistoryUnavailable

# Each adds its commands, in the order `kerneltui --help` lists them.
ADD_COMMANDS: tuple[Callable[[Subparsers], object], ...] = (
    evaluate.add_eval,
    evaluate.add_sanitize,
    evaluate.add_profile,
    checks.add_agents,
    checks.add_doctor,
    workspace.add_history,
    verdicts.add_verdicts,
    verdicts.add_guide,
    verdicts.add_comment,
    verdicts.add_rewind,
    agent.add_agent,
    agent.add_grant,
    mcp.add_mcp,
    context.add_parser,
    imports.add_parser,
    bench.add_parser,
    export.add_parser,
    custody.add_parser,
    gc.add_parser,
    workspace.add_init,
    dashboard.add_demo,
    config.add_config_command,
    dashboard.add_dashboard,
    dashboard.add_serve_web,
)


class Commands:
    """The subcommands, their names kept as they are added: main tells a command from a workspace folder by
    them, without reading them back out of argparse."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self._subcommands = parser.add_subparsers(dest="command")
        self.names: list[str] = []

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        self.names += [name, *kwargs.get("aliases", ())]
        return self._subcommands.add_parser(name, **kwargs)


def build_parser() -> tuple[argparse.ArgumentParser, Commands]:
    parser = argparse.ArgumentParser(prog="kerneltui", description="Supervise agents writing GPU kernels.")
    commands = Commands(parser)
    for add in ADD_COMMANDS:
        add(commands)
    return parser, commands


def dashboard_by_default(argv: list[str], parser: argparse.ArgumentParser, commands: list[str]) -> list[str]:
    """`kerneltui`, `kerneltui WORKSPACE`, `kerneltui --config F ...`: the dashboard's command line."""
    if argv and argv[0] in (*commands, "-h", "--help"):
        return argv
    if argv and not argv[0].startswith("-") and not Path(argv[0]).is_dir():
        parser.error(f"{argv[0]!r} is neither a command ({', '.join(commands)}) nor a workspace folder")
    return ["dashboard", *argv]


def main(argv: list[str] | None = None) -> int:
    """The command's exit status. A reader that stops reading stdout (`kerneltui history | head`) ends any
    command quietly."""
    try:
        try:
            return run(sys.argv[1:] if argv is None else argv)
        finally:
            flush_stdout()  # --help's SystemExit included
    except BrokenPipeError:
        return reader_gone()


def run(argv: list[str]) -> int:
    """The command argv names run, its usage errors said in one line (exit 2)."""
    parser, commands = build_parser()
    args = parser.parse_args(dashboard_by_default(argv, parser, commands.names))
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    printable_output(args.command)
    try:
        code: int = args.func(args)
    except (WorkspaceError, ConfigError, HistoryUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return code
