"""Keeping a workspace's dumps within its budget (the ladder's dumps_budget_mb): past it, the dumps of old
versions nobody approved go first, approved versions' and the best's last; each pruned evaluation is recorded
as such in the history. `kerneltui gc` does the same on demand, and says what it freed."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.contract.options import Options
from kerneltui.history import dumps as dump_rows
from kerneltui.history.store import Store

MIB = 1 << 20


@dataclass(frozen=True)
class Freed:
    folder: dump_rows.DumpFolder
    bytes: int


def to_prune(folders: list[dump_rows.DumpFolder], budget_bytes: int) -> list[dump_rows.DumpFolder]:
    """The folders to prune, in order, for the rest to fit `budget_bytes` (as the history recorded their sizes;
    0 keeps none): unapproved oldest first, then the approved and best, oldest first."""
    total = sum(f.bytes for f in folders)
    chosen: list[dump_rows.DumpFolder] = []
    for folder in sorted(folders, key=lambda f: (f.kept_longest, f.newest)):
        if total <= budget_bytes and budget_bytes > 0:
            break
        chosen.append(folder)
        total -= folder.bytes
    return chosen


def prune(store: Store, dumps_root: Path, budget_bytes: int, dry_run: bool = False, why: str = "gc") -> list[Freed]:
    """Prunes dumps until the workspace's fit `budget_bytes`; `dry_run`: says what it would free, frees nothing.
    Only folders beneath `dumps_root` count and are removed (a history row naming another path is left alone)."""
    folders = [f for f in dump_rows.dump_folders(store) if _beneath(Path(f.path), dumps_root)]
    freed: list[Freed] = []
    for folder in to_prune(folders, budget_bytes):
        size = _folder_bytes(Path(folder.path))
        if not dry_run:
            shutil.rmtree(folder.path, ignore_errors=True)
            dump_rows.mark_pruned(store, folder, size, why)
        freed.append(Freed(folder, size))
    return freed


def after_evaluation(store: Store, evaluation_id: int, dumped: bool) -> list[Freed]:
    """Holds the workspace's dumps (beside its history) to the budget the evaluation was judged with, once it
    has written its own."""
    if not dumped:
        return []
    budget = dump_rows.budget_of(store, evaluation_id) or Options().dumps_budget_mb
    return prune(store, store.path.parent / "dumps", int(budget * MIB), why="over the workspace's dumps budget")


def _beneath(path: Path, root: Path) -> bool:
    try:
        real, base = os.path.realpath(path), os.path.realpath(root)
    except OSError:
        return False
    return real != base and real.startswith(base.rstrip("/") + "/")


def _folder_bytes(path: Path) -> int:
    total = 0
    for base, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_size
            except OSError:
                continue
    return total


def describe(freed: list[Freed], dry_run: bool) -> str:
    verb = "would free" if dry_run else "freed"
    lines = [f"{f.folder.problem} {f.folder.version}: {f.bytes / MIB:.1f} MiB  {f.folder.path}" for f in freed]
    total = sum(f.bytes for f in freed)
    lines.append(f"{verb} {total / MIB:.1f} MiB in {len(freed)} folder(s) of dumps")
    return "\n".join(lines)
