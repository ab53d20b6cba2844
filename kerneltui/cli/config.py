"""`kerneltui config [--schema]`: the settings in effect, the config file checked, or the file's JSON schema."""

from __future__ import annotations

import argparse
import json

from kerneltui.cli.options import EXIT_OK, Subparsers, add_config


def cmd_config(args: argparse.Namespace) -> int:
    """The settings in effect (the config file checked), or with --schema the file's JSON schema."""
    from kerneltui.core import config as config_mod  # the config models (pydantic): for the commands using them

    shown = config_mod.json_schema() if args.schema else config_mod.in_effect(config_mod.load(args.config))
    print(json.dumps(shown, indent=2))
    return EXIT_OK


def add_config_command(commands: Subparsers) -> None:
    conf = commands.add_parser("config", help="the settings in effect, as JSON (the config file checked)")
    add_config(conf)
    conf.add_argument("--schema", action="store_true", help="the config file's JSON schema instead")
    conf.set_defaults(func=cmd_config)
