"""`kerneltui gc [--budget-mb N] [--dry-run]`: prunes the workspace's dumps down to its budget (the config's
[ladder] dumps_budget_mb unless --budget-mb says otherwise), old unapproved versions' first, and prints what it
freed; --dry-run prints what it would free and frees nothing."""

from __future__ import annotations

import argparse
import sys

from harness.contract.options import positive
from kerneltui.cli.options import EXIT_OK, EXIT_USAGE, Subparsers, add_config, add_workspace
from kerneltui.core.judging import dump_budget
from kerneltui.core.workspace import resolve


def run(args: argparse.Namespace) -> int:
    from kerneltui.core import config as config_mod  # the config models (pydantic): for the commands using them

    workspace = resolve(args.workspace)
    if args.budget_mb is None:
        try:
            budget = config_mod.load(args.config).ladder.options.dumps_budget_mb
        except config_mod.ConfigError as exc:
            print(f"kerneltui gc: {exc}", file=sys.stderr)
            return EXIT_USAGE
    else:
        budget = args.budget_mb
    if not workspace.db_path.is_file():
        print(f"nothing judged yet in {workspace.root}: no dumps to prune")
        return EXIT_OK
    from kerneltui.history.store import Store

    opened = Store.open(workspace.db_path)
    try:
        freed = dump_budget.prune(
            opened.store, workspace.state / "dumps", int(budget * dump_budget.MIB), dry_run=args.dry_run
        )
    finally:
        opened.store.close()
    print(f"dumps budget {budget:g} MiB")
    print(dump_budget.describe(freed, args.dry_run))
    return EXIT_OK


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """`kerneltui gc`."""
    parser = subparsers.add_parser(
        "gc", help="prune the workspace's dumps to its budget, old unapproved versions' first"
    )
    parser.add_argument(
        "--budget-mb", type=positive(float, zero=True), help="the budget (default: the config's dumps_budget_mb)"
    )
    parser.add_argument("--dry-run", action="store_true", help="say what would be freed, free nothing")
    add_config(parser)
    add_workspace(parser)
    parser.set_defaults(func=run)
    return parser
