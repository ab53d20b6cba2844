"""`kerneltui accept-problem PROBLEM`: the person accepts a problem's files as they are on disk now, as the
dashboard's accept key does. Until then a change to problem.py (or any file beside it that is not a version) is
not judged against; the diff accepted is printed, and evaluations judged against the earlier files show as stale."""

from __future__ import annotations

import argparse

from kerneltui.cli.options import EXIT_OK, Subparsers, add_workspace
from kerneltui.core.workspace import WorkspaceError, resolve


def cmd_accept_problem(args: argparse.Namespace) -> int:
    from kerneltui.core.judging.custody import Custody, CustodyError, accept
    from kerneltui.history.store import Store

    workspace = resolve(args.workspace)
    workspace.problem_dir(args.problem)
    store = Store.open(workspace.db_path, check=False).store
    try:
        accepted = accept(store, Custody(workspace), args.problem)
    except CustodyError as exc:
        raise WorkspaceError(str(exc)) from None
    finally:
        store.close()
    if accepted is None:
        print(f"{args.problem}: nothing to accept (the files on disk are the accepted ones)")
        return EXIT_OK
    print(accepted.diff or "(no difference in text)")
    stale = f"; {accepted.stale} evaluation(s) judged against the earlier files show as stale (↻)"
    print(f"{args.problem}: accepted ({accepted.digest[:12]}){stale if accepted.stale else ''}")
    return EXIT_OK


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """`kerneltui accept-problem`."""
    parser = subparsers.add_parser(
        "accept-problem",
        help="accept a problem's files as changed on disk: judged against from now (the dashboard's accept key)",
    )
    parser.add_argument("problem")
    add_workspace(parser, None)
    parser.set_defaults(func=cmd_accept_problem)
    return parser
