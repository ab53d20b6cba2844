"""The history's tables, created where missing; histories written by an older kerneltui gain the columns
added since."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import sqlite_utils


class Tables(Protocol):
    """What the schema needs of a history connection (kerneltui.history.connection.Connection): its tables."""

    def table(self, name: str) -> sqlite_utils.db.Table: ...


SCHEMA_VERSION = 4  # 2: evaluations.flags; 3: evaluations.race; 4: bench tables, agent tokens
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


def create_schema(store: Tables) -> None:
    store.table("meta").create({"key": str, "value": str}, pk="key", if_not_exists=True)
    store.table("problems").create(
        {
            "name": str,
            "path": str,
            "description": str,
            "problem_hash": str,
            "created": str,
            "error": str,
            "pending_hash": str,
        },
        pk="name",
        if_not_exists=True,
    )
    store.table("versions").create(
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
            "source": str,
            "mtime_ns": int,
        },
        pk="id",
        if_not_exists=True,
    )
    store.table("versions").create_index(["problem", "name", "hash"], unique=True, if_not_exists=True)
    store.table("evaluations").create(
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
            "race": str,
            **{k: float for k in KEY_METRICS},
        },
        pk="id",
        if_not_exists=True,
    )
    store.table("evaluations").create_index(["problem", "id"], if_not_exists=True)
    store.table("evaluations").create_index(["version_id"], if_not_exists=True)
    store.table("evaluations").create_index(["problem", "status", "median_us"], if_not_exists=True)
    store.table("evaluations").create_index(["status"], if_not_exists=True)
    store.table("rungs").create(
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
        pk="id",
        if_not_exists=True,
    )
    store.table("rungs").create_index(["evaluation_id"], if_not_exists=True)
    store.table("case_results").create(
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
        pk="id",
        if_not_exists=True,
    )
    store.table("case_results").create_index(["evaluation_id"], if_not_exists=True)
    store.table("timings").create(
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
        pk="id",
        if_not_exists=True,
    )
    store.table("timings").create_index(["evaluation_id"], if_not_exists=True)
    store.table("artifacts").create(
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
        pk="id",
        if_not_exists=True,
    )
    store.table("artifacts").create_index(["evaluation_id"], if_not_exists=True)
    store.table("pruned_dumps").create(  # evaluations whose dumps `kerneltui gc` or the dumps budget removed
        {"evaluation_id": int, "folder": str, "bytes": int, "pruned": str, "why": str},
        pk="evaluation_id",
        if_not_exists=True,
    )
    store.table("verdicts").create(
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
        pk="id",
        if_not_exists=True,
    )
    store.table("verdicts").create_index(["version_id"], if_not_exists=True)
    store.table("guidance").create(
        {"id": int, "problem": str, "text": str, "who": str, "created": str, "delivered": str},
        pk="id",
        if_not_exists=True,
    )
    store.table("agent_sessions").create(
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
        pk="id",
        if_not_exists=True,
    )
    store.table("agent_sessions").create_index(["problem", "id"], if_not_exists=True)
    store.table("agent_events").create(
        {"id": int, "session_id": int, "problem": str, "kind": str, "text": str, "data": str, "created": str},
        pk="id",
        if_not_exists=True,
    )
    store.table("agent_events").create_index(["problem", "id"], if_not_exists=True)
    store.table("agent_events").create_index(["session_id", "id"], if_not_exists=True)
    create_bench_tables(store)
    add_missing_columns(
        store,
        {
            "problems": {"error": str, "pending_hash": str},
            "versions": {"source": str, "mtime_ns": int},
            "evaluations": {"flags": str, "race": str},
            "agent_sessions": {"input_tokens": int, "output_tokens": int},
        },
    )
    store.table("meta").upsert({"key": "schema_version", "value": str(SCHEMA_VERSION)}, pk="key")


def create_bench_tables(store: Tables) -> None:
    """Agents measured on a suite: one run, and one entry per (problem, agent) with the folder it worked in."""
    store.table("bench_runs").create(
        {"id": int, "suite": str, "started": str, "ended": str, "settings": str, "note": str},
        pk="id",
        if_not_exists=True,
    )
    store.table("bench_entries").create(
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
        pk="id",
        if_not_exists=True,
    )
    store.table("bench_entries").create_index(["run_id", "id"], if_not_exists=True)


def add_missing_columns(store: Tables, wanted: dict[str, dict[str, type]]) -> None:
    """Histories written by an older kerneltui gain the columns added since."""
    for table, columns in wanted.items():
        have = store.table(table).columns_dict
        for name, kind in columns.items():
            if name not in have:
                store.table(table).add_column(name, kind)
