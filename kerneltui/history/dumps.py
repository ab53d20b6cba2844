"""Which evaluations' dumps are on disk, and which were pruned (`kerneltui gc`, the workspace's dump budget).

An evaluation's artifacts rows keep naming the files it dumped; a pruned evaluation has a row in pruned_dumps
(when, how many bytes, why), so the Asm pane and `kerneltui history` say "pruned" instead of showing nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from kerneltui.history.connection import Connection, now
from kerneltui.history.reads import MAY_BE_BEST


@dataclass
class DumpFolder:
    """One folder of dumps (the judge writes a version's per content hash, so evaluations of the same bytes
    share it): its size as recorded, its evaluations, and whether an approved or best one keeps it longest."""

    path: str
    problem: str
    version: str
    bytes: int = 0
    evaluations: list[int] = field(default_factory=list)
    kept_longest: bool = False  # approved, or the best so far

    @property
    def newest(self) -> int:
        return max(self.evaluations)


def dump_folders(store: Connection) -> list[DumpFolder]:
    """Every folder of dumps that is not pruned, oldest first."""
    rows = store.rows(
        """
        SELECT a.evaluation_id, e.problem, e.version, a.path, a.bytes,
               (SELECT d.verdict FROM verdicts d WHERE d.version_id = e.version_id ORDER BY d.id DESC LIMIT 1)
                   AS verdict
        FROM artifacts a JOIN evaluations e ON e.id = a.evaluation_id
        WHERE a.evaluation_id NOT IN (SELECT evaluation_id FROM pruned_dumps)
        ORDER BY a.evaluation_id, a.id
        """
    )
    best = _best_evaluations(store)
    folders: dict[str, DumpFolder] = {}
    for row in rows:
        path = os.path.dirname(str(row["path"] or ""))
        if not path:
            continue
        folder = folders.setdefault(path, DumpFolder(path, row["problem"], row["version"]))
        if row["evaluation_id"] not in folder.evaluations:
            folder.evaluations.append(row["evaluation_id"])
            folder.bytes = 0  # the newest evaluation's files are what the folder holds
        folder.bytes += int(row["bytes"] or 0)
        folder.kept_longest |= row["verdict"] == "approved" or row["evaluation_id"] in best
    return sorted(folders.values(), key=lambda f: f.newest)


def _best_evaluations(store: Connection) -> set[int]:
    """The best passing evaluation of each problem on each device (what a version must beat)."""
    rows = store.rows(
        f"SELECT id, problem, device_name, median_us FROM evaluations WHERE {MAY_BE_BEST} AND median_us IS NOT NULL"
    )
    fastest: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        key = (row["problem"], row["device_name"] or "")
        if key not in fastest or row["median_us"] < fastest[key]["median_us"]:
            fastest[key] = row
    return {int(row["id"]) for row in fastest.values()}


def mark_pruned(store: Connection, folder: DumpFolder, freed: int, why: str) -> None:
    stamp = now()
    with store.transaction():
        for evaluation_id in folder.evaluations:
            store.table("pruned_dumps").upsert(
                {"evaluation_id": evaluation_id, "folder": folder.path, "bytes": freed, "pruned": stamp, "why": why},
                pk="evaluation_id",
            )


def pruned(store: Connection, evaluation_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The pruned_dumps rows of these evaluations, by id (none for those whose dumps are kept)."""
    found: dict[int, dict[str, Any]] = {}
    for start in range(0, len(evaluation_ids), 500):
        chunk = evaluation_ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for row in store.rows(f"SELECT * FROM pruned_dumps WHERE evaluation_id IN ({marks})", list(chunk)):
            found[int(row["evaluation_id"])] = row
    return found


def budget_of(store: Connection, evaluation_id: int) -> float | None:
    """The dumps budget (MiB) the evaluation was asked with, from its recorded options."""
    row = store.first_row("SELECT options FROM evaluations WHERE id = ?", [evaluation_id])
    try:
        options = json.loads(row["options"] or "{}") if row else {}
    except ValueError:
        return None
    value = options.get("dumps_budget_mb") if isinstance(options, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
