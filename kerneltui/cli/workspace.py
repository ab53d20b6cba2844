"""`kerneltui history [PROBLEM]`: the workspace's evaluations, newest first; `kerneltui init NAME`: a new
problem folder to start from."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from harness.contract.units import TIME_NAME, duration_us, sig
from kerneltui.cli.options import EXIT_OK, Subparsers, add_json, add_workspace
from kerneltui.core.workspace import Workspace, resolve
from kerneltui.history.store import Store


def open_store(workspace: Workspace) -> Store:
    """The workspace's history, its warning (a history moved aside, say) said on stderr."""
    opened = Store.open(workspace.db_path)
    if opened.warning:
        print(f"warning: {opened.warning}", file=sys.stderr)
    return opened.store


def cmd_history(args: argparse.Namespace) -> int:
    workspace = resolve(args.workspace)
    store = open_store(workspace)
    try:
        rows = store.history(args.problem, limit=args.limit)
    finally:
        store.close()
    if args.json:
        print(json.dumps(rows, default=str))
        return EXIT_OK
    if not rows:
        print(f"no evaluations yet in {workspace.root}" + (f" for {args.problem}" if args.problem else ""))
        return EXIT_OK
    print(
        f"{'problem':<12} {'ver':<6} {'hash':<8} {'status':<10} {'failed at':<12} {'max err':>9} "
        f"{TIME_NAME:>10} {'vs ref':>7} {'roofline':>8}  {'verdict':<9} time"
    )
    for row in rows:
        print(history_line(row))
    return EXIT_OK


def history_line(row: dict[str, Any]) -> str:
    m = row["metrics"]
    speedup = f"{m['speedup']:.2f}×" if m.get("speedup") else "·"
    roof = f"{m['roofline_pct']:.0f}%" if m.get("roofline_pct") is not None else "·"
    status = row["status"] + (" ⚑" if row.get("flags") else "")  # flagged: --json says which and why
    status += " ↻" if row.get("stale") else ""  # judged against an older problem.py
    status += " ✂" if row.get("dumps") == "pruned" else ""  # its dumps were pruned (kerneltui gc)
    return (
        f"{row['problem']:<12} {row['version']:<6} {row['hash'][:8]:<8} {status:<10} "
        f"{row['failed_rung'] or '·':<12} {sig(m.get('max_abs')):>9} {duration_us(m.get('median_us')):>10} "
        f"{speedup:>7} {roof:>8}  {row['verdict'] or '·':<9} {(row['time'] or '')[:19]}"
    )


def cmd_init(args: argparse.Namespace) -> int:
    from kerneltui.core.scaffold import init_problem

    root = Path(args.workspace) if args.workspace else Path.cwd()
    written = init_problem(Workspace(root.resolve()), args.name)
    for path in written:
        print(f"wrote {path}")
    print(f"edit {written[0].name} for your kernel, then run: kerneltui {root}")
    return EXIT_OK


def add_history(commands: Subparsers) -> None:
    hist = commands.add_parser("history", help="evaluations, newest first")
    hist.add_argument("problem", nargs="?")
    add_workspace(hist, None)
    add_json(hist, None)
    hist.add_argument("--limit", type=int)
    hist.set_defaults(func=cmd_history)


def add_init(commands: Subparsers) -> None:
    init = commands.add_parser("init", help="a new problem folder: a commented problem.py and a first version")
    init.add_argument("name", help="the problem's folder name, e.g. softmax")
    add_workspace(init, "the folder of problem folders (default: the current folder)")
    init.set_defaults(func=cmd_init)
