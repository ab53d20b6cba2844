"""`kerneltui approve|reject VERSION`, `kerneltui guide PROBLEM TEXT` and `kerneltui comment VERSION --lines A-B
TEXT`: the person's word on a version, or to a problem's agent, as the dashboard's keys and guidance box give it."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kerneltui.cli.options import (
    EXIT_OK,
    EXIT_USAGE,
    IGNORED_WORKSPACE_HELP,
    VERSION_HELP,
    Subparsers,
    add_config,
    add_workspace,
)
from kerneltui.core.workspace import Workspace, WorkspaceError, for_version, resolve

if TYPE_CHECKING:
    from kerneltui.core.session import SessionEvent
    from kerneltui.history.store import Store


def version_for_verdict(store: Store, workspace: Workspace, path: Path) -> tuple[int, str]:
    """The history's row for this file as it is now (recorded if it was never judged)."""
    from kerneltui.core.judging import runner

    version_id, _, problem = runner.record_version(store, workspace, path)
    return version_id, problem


def cmd_verdict(args: argparse.Namespace) -> int:
    from kerneltui.core.config import load
    from kerneltui.core.session import Session  # the agents it runs are imported only by commands that run them
    from kerneltui.core.verdicts import approval_doubt

    workspace, _, name = for_version(Path(args.version))
    path = Path(args.version).resolve()
    verdict = "approved" if args.command == "approve" else "rejected"
    session = Session(workspace, load(args.config), say_on_terminal, run_scheduler=False)
    try:
        store = session.open_writer()
        version_id, problem = version_for_verdict(store, workspace, path)
        doubt = approval_doubt(store.latest_evaluation(version_id=version_id)) if verdict == "approved" else None
        if doubt and not args.force:
            print(f"error: {problem} {name} {doubt}: approve it anyway with --force", file=sys.stderr)
            return EXIT_USAGE
        row = {"version_id": version_id, "name": name, "path": str(path)}
        session.record_verdict(row, verdict, args.reason, args.who)
    finally:
        session.close()
    print(f"{problem} {name}: {verdict}" + (f" ({args.reason})" if args.reason else ""))
    return EXIT_OK


def say_on_terminal(event: SessionEvent) -> None:
    """What the session says beyond the command's own line: a tmux delivery, a warning, a history moved aside."""
    from kerneltui.core.session import Recorded

    if isinstance(event, Recorded) and event.what == "delivery":
        print(event.text)
    elif isinstance(event, Recorded) and event.what in ("warning", "history"):
        print(f"warning: {event.text}", file=sys.stderr)


def cmd_guide(args: argparse.Namespace) -> int:
    workspace = resolve(args.workspace)
    workspace.problem_dir(args.problem)
    text = " ".join(args.text).strip()
    if not text:
        raise WorkspaceError("guidance is empty: kerneltui guide PROBLEM TEXT")
    from kerneltui.core.config import load
    from kerneltui.core.session import Session

    session = Session(workspace, load(args.config), say_on_terminal, run_scheduler=False)
    try:
        session.record_guidance(args.problem, text, args.who)
    finally:
        session.close()
    print(f"{args.problem}: guidance recorded")
    return EXIT_OK


def cmd_comment(args: argparse.Namespace) -> int:
    from kerneltui.core.comments import CommentError, comment_on, parse_range

    workspace, problem, name = for_version(Path(args.version))
    path = Path(args.version).resolve()
    try:
        first, last = parse_range(args.lines)
        lines = path.read_text(errors="replace").splitlines()
        comment = comment_on(name, path.name, lines, first, last, " ".join(args.text))
    except CommentError as exc:
        raise WorkspaceError(str(exc)) from None
    from kerneltui.core.config import load
    from kerneltui.core.session import Session

    session = Session(workspace, load(args.config), say_on_terminal, run_scheduler=False)
    try:
        session.record_guidance(problem, comment.guidance(), args.who)
    finally:
        session.close()
    print(f"{problem} {name}: comment on {path.name}:{first}-{last} recorded as guidance")
    return EXIT_OK


def cmd_rewind(args: argparse.Namespace) -> int:
    workspace = resolve(args.workspace)
    workspace.problem_dir(args.problem)
    from kerneltui.core.config import load
    from kerneltui.core.session import Session

    session = Session(workspace, load(args.config), say_on_terminal, run_scheduler=False)
    try:
        store = session.open_writer()
        row = next((r for r in store.version_rows(args.problem) if r["name"] == args.version), None)
        if row is None:
            raise WorkspaceError(f"{args.problem} has no version {args.version} in its history")
        source = store.version_source(row["version_id"]) or Path(str(row["path"])).read_text(errors="replace")
        said = session.record_rewind(args.problem, row, source, args.who)
    finally:
        session.close()
    print(said)
    return EXIT_OK


def add_verdicts(commands: Subparsers) -> None:
    """`approve` and `reject`: the same options, but a rejection needs its reason."""
    for verb, helptext in (
        ("approve", "approve a version, as the dashboard's a does"),
        ("reject", "reject a version with a reason, as the dashboard's r does"),
    ):
        verdict = commands.add_parser(verb, help=helptext)
        verdict.add_argument("version", help=VERSION_HELP)
        verdict.add_argument("--reason", required=verb == "reject", help="why (shown to the agent)")
        verdict.add_argument("--who", default=getpass.getuser())
        if verb == "approve":
            verdict.add_argument("--force", action="store_true", help="approve a version not judged, or failed")
        add_config(verdict)
        add_workspace(verdict, IGNORED_WORKSPACE_HELP)
        verdict.set_defaults(func=cmd_verdict)


def add_guide(commands: Subparsers) -> None:
    guide = commands.add_parser("guide", help="send guidance for a problem's agent, as the dashboard's box does")
    guide.add_argument("problem")
    guide.add_argument("text", nargs="+")
    add_workspace(guide, None)
    guide.add_argument("--who", default=getpass.getuser())
    add_config(guide)
    guide.set_defaults(func=cmd_guide)


def add_comment(commands: Subparsers) -> None:
    comment = commands.add_parser(
        "comment", help="comment on lines of a version: guidance quoting them, as the dashboard's c does"
    )
    comment.add_argument("version", help=VERSION_HELP)
    comment.add_argument("--lines", required=True, help="a line (12) or a range (12-18), counted from 1")
    comment.add_argument("text", nargs="+")
    comment.add_argument("--who", default=getpass.getuser())
    add_config(comment)
    add_workspace(comment, IGNORED_WORKSPACE_HELP)
    comment.set_defaults(func=cmd_comment)


def add_rewind(commands: Subparsers) -> None:
    rewind = commands.add_parser(
        "rewind", help="tell a problem's agent to continue from an earlier version (its next one is diffed against it)"
    )
    rewind.add_argument("problem")
    rewind.add_argument("version", help="a version's name, e.g. v004")
    add_workspace(rewind, None)
    rewind.add_argument("--who", default=getpass.getuser())
    add_config(rewind)
    rewind.set_defaults(func=cmd_rewind)
