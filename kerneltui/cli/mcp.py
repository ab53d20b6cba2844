"""`kerneltui mcp`: the verification ladder as an MCP server over stdio (kerneltui.mcp_server). Its options are
defined here, so building the parser imports neither the server nor the agents' tools it serves."""

from __future__ import annotations

import argparse

from kerneltui.cli.options import Subparsers, add_config, add_workspace


def cmd_mcp(args: argparse.Namespace) -> int:
    from kerneltui.mcp_server import cmd_mcp as serve

    return serve(args)


def add_mcp(commands: Subparsers) -> None:
    parser = commands.add_parser("mcp", help="serve the ladder to any coding agent over MCP (stdio)")
    add_workspace(parser)
    add_config(parser)
    parser.add_argument(
        "--session",
        type=int,
        help="record into this agent session (one the process driving the agent started) instead of a new one",
    )
    parser.add_argument(
        "--problem",
        action="append",
        metavar="PROBLEM",
        help="the problem this server acts for (repeat for more; default: the joined session's, else every problem)",
    )
    parser.add_argument(
        "--hide",
        action="append",
        metavar="PROBLEM",
        help="a problem folder closed to this server's agents (other agents' copies in a bench; repeat)",
    )
    parser.set_defaults(func=cmd_mcp)
