"""`kerneltui bench-agents SUITE --agent A [--agent B ...]`: agents measured on a suite of problems, and
`kerneltui leaderboard [--workspace BENCH]`: a bench's figures again (fast_p, each agent's best per problem)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kerneltui.cli.options import EXIT_OK, EXIT_USAGE, Subparsers, add_config, add_executor, add_json, add_workspace
from kerneltui.core.bench import leaderboard


def parse_ps(text: str) -> tuple[float, ...]:
    try:
        ps = tuple(sorted({float(p) for p in text.split(",") if p.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--p {text!r}: comma-separated numbers, e.g. 0,1,2") from None
    if not ps or min(ps) < 0:
        raise argparse.ArgumentTypeError(f"--p {text!r}: numbers of 0 or more, e.g. 0,1,2")
    return ps


def cmd_bench(args: argparse.Namespace) -> int:
    from kerneltui.core.bench.suites import Bench, BenchError, parse_agent, suite_problems
    from kerneltui.core.config import load_for

    config = load_for(args)
    agent = config.agent
    agent.max_versions = args.budget
    agent.max_cost_usd = args.max_cost if args.max_cost is not None else agent.max_cost_usd
    agent.target_roofline_pct = args.target_roofline
    agent.pace = args.pace
    agent.feedback_file = False
    say = print_to(sys.stderr if args.json else sys.stdout)
    try:
        specs = [parse_agent(text, config.acp_agents, agent.model) for text in args.agent]
        problems = suite_problems(Path(args.suite))
        into = Path(args.into) if args.into else default_into(Path(args.suite))
        bench = Bench(into, config, specs, race=args.race, say=say, minutes=args.minutes)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    settings = {"budget": args.budget, "max_cost_usd": args.max_cost, "race": args.race, "ps": list(args.p)}
    settings["minutes"] = args.minutes
    say(f"bench of {len(specs)} agent(s) on {len(problems)} problem(s) in {bench.workspace.root}")
    run_id = bench.run(Path(args.suite).resolve(), problems, settings)
    return show(bench.workspace.root, run_id, args.p, args.json, say)


def default_into(suite: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return Path("bench") / f"{suite.resolve().name}-{stamp}"


def show(root: Path, run_id: int | None, ps: tuple[float, ...] | None, as_json: bool, say: Any = print) -> int:
    from kerneltui.core.bench.suites import read_board
    from kerneltui.core.workspace import Workspace

    board = read_board(Workspace(root.resolve()), run_id, ps)
    if board is None:
        print(f"error: no bench run{f' {run_id}' if run_id else ''} in {root}", file=sys.stderr)
        return EXIT_USAGE
    print(board.dumps() if as_json else leaderboard.table_text(board))
    if not as_json:
        print(f"\nthe dashboard shows it: kerneltui {root} (L: leaderboard)")
    return EXIT_OK


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from kerneltui.core.workspace import resolve

    return show(resolve(args.workspace).root, args.run, args.p, args.json)


def print_to(stream: Any) -> Any:
    def say(line: str) -> None:
        print(line, file=stream, flush=True)

    return say


def add_parser(subparsers: Subparsers) -> None:
    """`kerneltui bench-agents` and `kerneltui leaderboard`."""
    bench = subparsers.add_parser(
        "bench-agents", help="agents measured on a suite of problems: fast_p, roofline, versions, minutes, cost"
    )
    bench.add_argument("suite", help="a folder of problem folders, one problem folder, or a file listing them")
    bench.add_argument(
        "--agent",
        action="append",
        required=True,
        help="replay[:DIR], claude[:MODEL], acp:NAME_OR_COMMAND or an [acp] name; LABEL=SPEC names it (repeat)",
    )
    bench.add_argument("--budget", type=int, default=5, help="versions per agent per problem (default 5)")
    bench.add_argument("--max-cost", type=float, dest="max_cost", help="USD per agent per problem")
    bench.add_argument(
        "--target-roofline", type=float, dest="target_roofline", help="an agent stops at this %% of roofline"
    )
    bench.add_argument("--race", action="store_true", help="the agents work on each problem at once")
    bench.add_argument("--minutes", type=float, help="wall-clock minutes per agent per problem (then it is stopped)")
    bench.add_argument("--p", type=parse_ps, default=leaderboard.DEFAULT_PS, help="fast_p thresholds (default 0,1,2)")
    bench.add_argument("--pace", type=float, default=0.0, help="replay: multiply the recorded waits (default 0)")
    bench.add_argument("--into", help="the bench workspace (default: ./bench/<suite>-<time>)")
    add_json(bench, "the leaderboard as one JSON object on stdout")
    add_config(bench)
    add_executor(bench)
    bench.set_defaults(func=cmd_bench)
    board = subparsers.add_parser("leaderboard", help="a bench's figures: fast_p and each agent's best per problem")
    add_workspace(board, "the bench workspace (default: the current folder)")
    board.add_argument("--run", type=int, help="a run's number (default: the newest)")
    board.add_argument("--p", type=parse_ps, help="fast_p thresholds (default: the run's)")
    add_json(board, "one JSON object")
    board.set_defaults(func=cmd_leaderboard)
