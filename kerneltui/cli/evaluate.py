"""`kerneltui eval VERSION`, `kerneltui sanitize VERSION` and `kerneltui profile VERSION`: the ladder run on a version
file, and recorded.

Exit status: 0 every rung passed (skips allowed), 1 a rung failed, 2 bad usage or a bad problem.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.contract import options as ladder_options
from harness.contract.report import digest_against, rung_line, trust_lines
from harness.contract.results import PROFILE_RUNGS, RungResult
from harness.contract.source import VersionTooLarge
from harness.contract.units import TIME_MEANS
from kerneltui.cli.options import (
    CONFIG_HELP,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    IGNORED_WORKSPACE_HELP,
    VERSION_HELP,
    Subparsers,
    add_config,
    add_executor,
    add_json,
    add_workspace,
)
from kerneltui.core.workspace import WorkspaceError, for_version

if TYPE_CHECKING:
    from kerneltui.history.store import Store


def cmd_eval(args: argparse.Namespace, kind: str | None = None, also: tuple[str, ...] = ()) -> int:
    """`also`: rungs climbed besides the configured ones (the sanitize rung)."""
    # the judge's machinery and the config models (pydantic) are imported here, not for every command
    from kerneltui.cli.workspace import open_store
    from kerneltui.core.config import load_for
    from kerneltui.core.judging import runner

    workspace, _, _ = for_version(Path(args.version))
    if args.workspace and Path(args.workspace).resolve() != workspace.root:
        print(f"note: {args.version} belongs to workspace {workspace.root}; recording it there", file=sys.stderr)
    config = load_for(args)
    try:  # the config file's [ladder] options, then the command line's
        options = config.ladder.options.updated(ladder_options.given(args), "kerneltui eval")
        options = dataclasses.replace(options, rungs=ladder_options.parse_rungs([*options.rungs, *also]))
    except ValueError as exc:
        raise WorkspaceError(str(exc)) from None
    store = open_store(workspace)

    def show(rung: RungResult) -> None:
        if not args.json:
            print(rung_line(rung), flush=True)

    digest: list[str] = []
    try:
        outcome = runner.evaluate(
            store, workspace, Path(args.version), options, config.ladder.python, show, kind, config.ladder
        )
        if kind == "profile" and outcome.evaluation is not None:
            digest = profile_digest(store, outcome.evaluation.rungs, outcome.evaluation_id)
    except VersionTooLarge as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        store.close()
    if outcome.note:
        print(f"note: {outcome.note}", file=sys.stderr)
    if outcome.problem_error:
        print(f"error: {outcome.problem_error}", file=sys.stderr)
        return EXIT_USAGE
    if outcome.evaluation is None:
        print(f"error: {outcome.error}", file=sys.stderr)
        return EXIT_FAILED
    ev = outcome.evaluation
    if args.json:
        data = eval_json(ev.to_json(), outcome.evaluation_id)
        print(json.dumps({**data, "digest": digest} if kind == "profile" else data, default=str))
    else:
        for line in [*digest, *trust_lines(ev)]:
            print(line)
        print(
            f"{ev.problem} {ev.version}: {ev.status} ({ev.device.get('name')}; {ev.seconds:.1f} s; "
            f"recorded as evaluation {outcome.evaluation_id} in {workspace.db_path})"
        )
    return EXIT_OK if ev.ok else EXIT_FAILED


def profile_digest(store: Store, rungs: list[RungResult], evaluation_id: int) -> list[str]:
    """The profile's digest, against the best's profile on the same GPU where there is one."""
    profile = next((r for r in rungs if r.name == "profile"), None)
    if profile is None or profile.ok is not True:
        return []
    row = store.evaluation(evaluation_id) or {}
    best = store.best_profile(str(row.get("problem")), int(row.get("version_id") or 0), row.get("device_name"))
    return digest_against(profile.metrics, best)


def eval_json(data: dict[str, Any], evaluation_id: int) -> dict[str, Any]:
    """DESIGN.md's object first (problem, version, ok, device, rungs), then the rest."""
    ordered = {k: data[k] for k in ("problem", "version", "ok", "device", "rungs")}
    ordered.update({k: v for k, v in data.items() if k not in ordered})
    ordered["evaluation_id"] = evaluation_id
    ordered["median_us_is"] = TIME_MEANS
    return ordered


def cmd_profile(args: argparse.Namespace) -> int:
    """The version loaded, compiled and checked, then its kernels under Nsight Compute (the profile rung)."""
    args.rungs = ",".join(PROFILE_RUNGS)
    return cmd_eval(args, kind="profile")


def cmd_sanitize(args: argparse.Namespace) -> int:
    """The version judged again with compute-sanitizer's tools over its kernels (the sanitize rung): a finding
    fails it."""
    return cmd_eval(args, also=("sanitize",))


def add_eval(commands: Subparsers) -> None:
    ev = commands.add_parser("eval", help="run the ladder on a version file and record it")
    ev.add_argument("version", help=VERSION_HELP)
    add_workspace(ev, IGNORED_WORKSPACE_HELP)
    add_json(ev, "print one JSON object")
    add_config(ev, CONFIG_HELP + "; its [ladder] options apply, flags win")
    ladder_options.add_arguments(ev, leave_out=ladder_options.PER_RUN)  # the history gives both
    add_executor(ev)
    ev.set_defaults(func=cmd_eval)


def add_profile(commands: Subparsers) -> None:
    prof = commands.add_parser("profile", help="profile a version's kernels with Nsight Compute and record it")
    prof.add_argument("version", help=VERSION_HELP)
    add_workspace(prof, IGNORED_WORKSPACE_HELP)
    add_json(prof, "print one JSON object")
    add_config(prof)
    add_executor(prof)
    prof.set_defaults(func=cmd_profile)


def add_sanitize(commands: Subparsers) -> None:
    sanitize = commands.add_parser(
        "sanitize",
        help="judge a version again with compute-sanitizer (memcheck, racecheck, initcheck, synccheck) and record it",
    )
    sanitize.add_argument("version", help=VERSION_HELP)
    add_workspace(sanitize, IGNORED_WORKSPACE_HELP)
    add_json(sanitize, "print one JSON object")
    add_config(sanitize, CONFIG_HELP + "; its [ladder] options apply")
    add_executor(sanitize)
    sanitize.set_defaults(func=cmd_sanitize)
