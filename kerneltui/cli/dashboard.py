"""`kerneltui dashboard [WORKSPACE]` (what `kerneltui [WORKSPACE]` opens), `kerneltui serve-web`: the same in a
browser, and `kerneltui demo`: the whole loop on example problems with a replayed agent."""

from __future__ import annotations

import argparse
from pathlib import Path

from kerneltui.cli.options import EXIT_OK, Subparsers, add_config, add_executor, add_workspace_folder, workspace_given
from kerneltui.core.workspace import resolve
from kerneltui.history.store import Store

NO_JUDGE_HELP = "show the history without judging anything"


def cmd_dashboard(args: argparse.Namespace) -> int:
    from kerneltui.core.config import load_for
    from kerneltui.ui.app import KernelTUI

    workspace = resolve(workspace_given(args))
    config = load_for(args)
    Store.refuse_unusable(workspace.db_path)
    KernelTUI(workspace, config, run_judges=not args.no_judge).run()
    return EXIT_OK


def cmd_serve_web(args: argparse.Namespace) -> int:
    """The dashboard in a browser: each connection runs `kerneltui dashboard` for the workspace."""
    from kerneltui.core.config import load
    from kerneltui.web import serve

    workspace = resolve(workspace_given(args))
    load(args.config)  # a bad config (or a newer kerneltui's history) is said here, not in each browser
    Store.refuse_unusable(workspace.db_path)
    extra = ["--config", str(Path(args.config).resolve())] if args.config else []
    return serve(workspace.root, args.host, args.port, extra + (["--no-judge"] if args.no_judge else []))


def cmd_demo(args: argparse.Namespace) -> int:
    from kerneltui.demo import run_demo

    return run_demo(pace=args.pace, keep=args.keep)


def add_demo(commands: Subparsers) -> None:
    demo = commands.add_parser(
        "demo", help="the whole loop on example problems with a replayed agent: no GPU, no API key"
    )
    demo.add_argument("--pace", type=float, default=1.0, help="multiply the recorded waits (default 1)")
    demo.add_argument("--keep", action="store_true", help="keep the demo workspace afterwards")
    demo.set_defaults(func=cmd_demo)


def add_dashboard(commands: Subparsers) -> None:
    dash = commands.add_parser("dashboard", help="the dashboard (what `kerneltui [WORKSPACE]` opens)")
    add_workspace_folder(dash)
    add_config(dash)
    dash.add_argument("--no-judge", action="store_true", help=NO_JUDGE_HELP)
    add_executor(dash)
    dash.set_defaults(func=cmd_dashboard)


def add_serve_web(commands: Subparsers) -> None:
    web = commands.add_parser("serve-web", help="the dashboard in a browser, behind a token printed at start")
    add_workspace_folder(web)
    web.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1, this box only)")
    web.add_argument("--port", type=int, default=0, help="the port (default 0: a free one, printed)")
    add_config(web)
    web.add_argument("--no-judge", action="store_true", help=NO_JUDGE_HELP)
    web.set_defaults(func=cmd_serve_web)
