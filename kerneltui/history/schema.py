"""The history's tables, brought up to date by numbered migrations.

`meta.schema_version` is the number of the last migration a history has had (0: a new file, no meta table).
Opening a history to write applies each later migration in order, all in one transaction, each recorded in
`schema_migrations`; a history written by a newer kerneltui (a version past ours) is refused and left as it
is. A migration only adds what is missing: several changes came without a number of their own, so a history
of one version may have them or not, and either way ends with the layout of a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import sqlite_utils


class Tables(Protocol):
    """What the schema needs of a history connection (kerneltui.history.connection.Connection)."""

    path: Path

    def table(self, name: str) -> sqlite_utils.db.Table: ...

    def transaction(self) -> AbstractContextManager[None]: ...

    def first_row(self, sql: str, params: list[Any] | None = None) -> dict[str, Any] | None: ...


class HistoryUnavailable(Exception):
    """The history cannot be opened here; the message says why and what to do."""


class HistoryTooNew(HistoryUnavailable):
    """The history was written by a newer kerneltui: its layout is unknown here, so it is not opened."""


KEY_METRICS = (
    "max_abs",
    "max_rel",
    "rmse",
    "psnr",
    "cosine",
    "median_us",
    "ref_median_us",
    "speedup",
    "vs_best",
    "roofline_pct",
)


def migrate(store: Tables) -> None:
    """Applies the migrations past the history's version, in order, in one transaction, each recorded."""
    if refuse_newer(store) == SCHEMA_VERSION:
        return  # the usual open: nothing written, no write lock taken
    with store.transaction():
        version = refuse_newer(store)  # again under the write lock: another process may have migrated it
        for number, step in MIGRATIONS:
            if number > version:
                step(store)
                record_applied(store, number)


def refuse_newer(store: Tables) -> int:
    """The history's version; HistoryTooNew when a newer kerneltui wrote it."""
    version = stored_version(store)
    if version > SCHEMA_VERSION:
        raise HistoryTooNew(
            f"{store.path} was written by a newer kerneltui (history version {version}; this one knows up to "
            f"{SCHEMA_VERSION}): upgrade kerneltui to open it, or use another workspace"
        )
    return version


def stored_version(store: Tables) -> int:
    """meta.schema_version: the last migration applied (0 for a new file)."""
    if store.first_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'") is None:
        return 0
    row = store.first_row("SELECT value FROM meta WHERE key = 'schema_version'")
    return int(row["value"]) if row else 0


def record_applied(store: Tables, number: int) -> None:
    """The migration in schema_migrations (made by the first to be recorded), and the version it gives."""
    applied = datetime.now(UTC).isoformat(timespec="milliseconds")
    migrations = store.table("schema_migrations")
    migrations.create({"number": int, "applied": str}, pk="number", if_not_exists=True)
    migrations.upsert({"number": number, "applied": applied}, pk="number")
    store.table("meta").upsert({"key": "schema_version", "value": str(number)}, pk="key")


# --- the migrations: each creates only what is missing ---------------------------------------------


def first_layout(store: Tables) -> None:
    """1: the tables as the first kerneltui wrote them."""
    create(store, "meta", {"key": str, "value": str}, pk="key")
    create(
        store, "problems", {"name": str, "path": str, "description": str, "problem_hash": str, "created": str}, "name"
    )
    create(
        store,
        "versions",
        {
            "id": int,
            "problem": str,
            "name": str,
            "number": int,
            "path": str,
            "hash": str,
            "size": int,
            "notes": str,
            "author": str,
            "created": str,
            "deleted": str,
        },
    )
    store.table("versions").create_index(["problem", "name", "hash"], unique=True, if_not_exists=True)
    create(
        store,
        "evaluations",
        {
            "id": int,
            "version_id": int,
            "problem": str,
            "version": str,
            "hash": str,
            "status": str,
            "ok": int,
            "failed_rung": str,
            "error": str,
            "device_kind": str,
            "device_name": str,
            "arch": str,
            "sandbox": str,
            "problem_hash": str,
            "seeds": str,
            "options": str,
            "device": str,
            "queued": str,
            "started": str,
            "finished": str,
            "seconds": float,
            **{k: float for k in KEY_METRICS},
        },
        indexes=(["problem", "id"], ["version_id"]),
    )
    create(
        store,
        "rungs",
        {
            "id": int,
            "evaluation_id": int,
            "idx": int,
            "name": str,
            "ok": int,
            "skipped": str,
            "err": str,
            "seconds": float,
            "metrics": str,
            "log": str,
        },
        indexes=(["evaluation_id"],),
    )
    create(
        store,
        "case_results",
        {
            "id": int,
            "evaluation_id": int,
            "case_label": str,
            "seed": int,
            "ok": int,
            "err": str,
            "max_abs": float,
            "max_rel": float,
            "mse": float,
            "rmse": float,
            "psnr": float,
            "cosine": float,
        },
        indexes=(["evaluation_id"],),
    )
    create(
        store,
        "timings",
        {
            "id": int,
            "evaluation_id": int,
            "case_label": str,
            "median_us": float,
            "p20_us": float,
            "p80_us": float,
            "min_us": float,
            "n": int,
            "noise_pct": float,
            "ref_median_us": float,
            "speedup": float,
            "gbps": float,
            "tflops": float,
            "roofline_pct": float,
            "device_name": str,
        },
        indexes=(["evaluation_id"],),
    )
    create(
        store,
        "artifacts",
        {
            "id": int,
            "evaluation_id": int,
            "kernel": str,
            "dsl": str,
            "kind": str,
            "path": str,
            "bytes": int,
            "case_label": str,
        },
        indexes=(["evaluation_id"],),
    )
    create(
        store,
        "verdicts",
        {
            "id": int,
            "version_id": int,
            "problem": str,
            "version": str,
            "hash": str,
            "verdict": str,
            "reason": str,
            "who": str,
            "created": str,
        },
        indexes=(["version_id"],),
    )
    create(store, "guidance", {"id": int, "problem": str, "text": str, "who": str, "created": str, "delivered": str})


def flags_and_agents(store: Tables) -> None:
    """2: evaluations.flags (timings doubted), and what version 1 gained without a number: problems.error,
    versions.source and mtime_ns, the status indexes and the agents' tables."""
    add_missing_columns(
        store,
        {"problems": {"error": str}, "versions": {"source": str, "mtime_ns": int}, "evaluations": {"flags": str}},
    )
    store.table("evaluations").create_index(["problem", "status", "median_us"], if_not_exists=True)
    store.table("evaluations").create_index(["status"], if_not_exists=True)
    create(
        store,
        "agent_sessions",
        {
            "id": int,
            "problem": str,
            "backend": str,
            "model": str,
            "pid": int,
            "started": str,
            "ended": str,
            "stop_reason": str,
            "versions": int,
            "turns": int,
            "cost_usd": float,
        },
        indexes=(["problem", "id"],),
    )
    create(
        store,
        "agent_events",
        {"id": int, "session_id": int, "problem": str, "kind": str, "text": str, "data": str, "created": str},
        indexes=(["problem", "id"], ["session_id", "id"]),
    )


def race(store: Tables) -> None:
    """3: evaluations.race (a passing version timed against the best)."""
    add_missing_columns(store, {"evaluations": {"race": str}})


def bench(store: Tables) -> None:
    """4: agents measured on a suite (bench_runs, bench_entries), and the tokens of an agent's session."""
    create(store, "bench_runs", {"id": int, "suite": str, "started": str, "ended": str, "settings": str, "note": str})
    create(
        store,
        "bench_entries",
        {
            "id": int,
            "run_id": int,
            "problem": str,
            "agent": str,
            "spec": str,
            "folder": str,
            "session_id": int,
            "started": str,
            "ended": str,
            "stop_reason": str,
            "error": str,
        },
        indexes=(["run_id", "id"],),
    )
    add_missing_columns(store, {"agent_sessions": {"input_tokens": int, "output_tokens": int}})


def custody_and_pruning(store: Tables) -> None:
    """5: what version 4 gained without a number: problems.pending_hash (a change on disk awaiting acceptance)
    and pruned_dumps (evaluations whose dumps `kerneltui gc` or the dumps budget removed)."""
    add_missing_columns(store, {"problems": {"pending_hash": str}})
    create(
        store,
        "pruned_dumps",
        {"evaluation_id": int, "folder": str, "bytes": int, "pruned": str, "why": str},
        "evaluation_id",
    )


def rewinds(store: Tables) -> None:
    """6: rewinds (the person told a problem's agent to continue from an earlier version)."""
    create(
        store,
        "rewinds",
        {"id": int, "problem": str, "version_id": int, "version": str, "who": str, "created": str},
        indexes=(["problem", "id"],),
    )


# A change to the layout is a new step with the next number, never an edit of one: a history applies each step
# past its version once, so an edited step would never reach the histories that had it already.
MIGRATIONS: tuple[tuple[int, Callable[[Tables], None]], ...] = (
    (1, first_layout),
    (2, flags_and_agents),
    (3, race),
    (4, bench),
    (5, custody_and_pruning),
    (6, rewinds),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


def create(
    store: Tables, table: str, columns: dict[str, type], pk: str = "id", indexes: tuple[list[str], ...] = ()
) -> None:
    """The table and its indexes, where missing."""
    store.table(table).create(columns, pk=pk, if_not_exists=True)
    for index in indexes:
        store.table(table).create_index(index, if_not_exists=True)


def add_missing_columns(store: Tables, wanted: dict[str, dict[str, type]]) -> None:
    for table, columns in wanted.items():
        have = store.table(table).columns_dict
        for name, kind in columns.items():
            if name not in have:
                store.table(table).add_column(name, kind)
