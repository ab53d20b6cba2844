"""The history: every problem, version, evaluation, rung, timing and artifact, in SQLite (WAL).

A version is keyed by (problem, name, content hash): rewriting v003.py makes a new version row and
a new evaluation, and the old ones stay. A database that cannot be read is moved aside (kept, not
deleted) and a fresh one started, with a message saying where the old one went.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.results import Evaluation, RungResult

if TYPE_CHECKING:
    import sqlite_utils

SCHEMA_VERSION = 2  # 2: evaluations.flags
# A passing evaluation may be "the best" only when nothing flagged it, or the person approved its version.
MAY_BE_BEST = (
    "status = 'pass' AND (flags IS NULL OR flags = '[]' OR (SELECT d.verdict FROM verdicts d "
    "WHERE d.version_id = evaluations.version_id ORDER BY d.id DESC LIMIT 1) = 'approved')"
)
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


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass
class OpenedStore:
    store: Store
    warning: str | None = None


class Store:
    def __init__(self, path: Path, create: bool = True) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(path), timeout=30, check_same_thread=False, isolation_level=None)
        # Held by a thread over a run of queries: closing a connection another thread is reading
        # crashes the process (SIGSEGV), so close() waits for the holder.
        self.lock = threading.RLock()
        self.closed = False
        self.conn.execute("PRAGMA busy_timeout = 30000")
        self._db: sqlite_utils.Database | None = None
        if create:  # readers open an existing history and write nothing
            self.conn.execute("PRAGMA journal_mode = WAL")
            self._create_schema()

    @property
    def db(self) -> sqlite_utils.Database:
        """sqlite-utils over the same connection, imported on first use: readers never need it."""
        if self._db is None:
            import sqlite_utils

            self._db = sqlite_utils.Database(self.conn)
        return self._db

    @classmethod
    def open(cls, path: Path, check: bool = True) -> OpenedStore:
        """Opens (or creates) the history; a corrupt file is moved aside and a new one started.

        check=False skips the full page scan (PRAGMA quick_check): a file that is not a database still
        fails at once; the dashboard runs the scan later, off its start-up path (see integrity()).
        """
        try:
            store = cls(path)
            problem = store.integrity() if check else None
            if problem:
                raise sqlite3.DatabaseError(problem)
            return OpenedStore(store)
        except sqlite3.DatabaseError as exc:
            aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
            for suffix in ("", "-wal", "-shm"):
                src = Path(str(path) + suffix)
                if src.exists():
                    src.rename(Path(str(aside) + suffix))
            warning = f"{path} could not be read ({exc}); moved it to {aside} and started a new history"
            return OpenedStore(cls(path), warning)

    def integrity(self) -> str | None:
        """None when SQLite's quick_check finds the file sound, else what it found."""
        row = self.conn.execute("PRAGMA quick_check").fetchone()
        return None if row and row[0] == "ok" else str(row[0] if row else "no answer")

    def table(self, name: str) -> sqlite_utils.db.Table:
        return self.db.table(name)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.conn.close()

    @contextmanager
    def held(self) -> Iterator[Store | None]:
        """This store for one thread's run of queries, or None once it is closed."""
        with self.lock:
            yield None if self.closed else self

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def _create_schema(self) -> None:
        self.table("meta").create({"key": str, "value": str}, pk="key", if_not_exists=True)
        self.table("problems").create(
            {"name": str, "path": str, "description": str, "problem_hash": str, "created": str, "error": str},
            pk="name",
            if_not_exists=True,
        )
        self.table("versions").create(
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
        self.table("versions").create_index(["problem", "name", "hash"], unique=True, if_not_exists=True)
        self.table("evaluations").create(
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
            pk="id",
            if_not_exists=True,
        )
        self.table("evaluations").create_index(["problem", "id"], if_not_exists=True)
        self.table("evaluations").create_index(["version_id"], if_not_exists=True)
        self.table("evaluations").create_index(["problem", "status", "median_us"], if_not_exists=True)
        self.table("evaluations").create_index(["status"], if_not_exists=True)
        self.table("rungs").create(
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
        self.table("rungs").create_index(["evaluation_id"], if_not_exists=True)
        self.table("case_results").create(
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
        self.table("case_results").create_index(["evaluation_id"], if_not_exists=True)
        self.table("timings").create(
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
        self.table("timings").create_index(["evaluation_id"], if_not_exists=True)
        self.table("artifacts").create(
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
        self.table("artifacts").create_index(["evaluation_id"], if_not_exists=True)
        self.table("verdicts").create(
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
        self.table("verdicts").create_index(["version_id"], if_not_exists=True)
        self.table("guidance").create(
            {"id": int, "problem": str, "text": str, "who": str, "created": str, "delivered": str},
            pk="id",
            if_not_exists=True,
        )
        self.table("agent_sessions").create(
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
        self.table("agent_sessions").create_index(["problem", "id"], if_not_exists=True)
        self.table("agent_events").create(
            {"id": int, "session_id": int, "problem": str, "kind": str, "text": str, "data": str, "created": str},
            pk="id",
            if_not_exists=True,
        )
        self.table("agent_events").create_index(["problem", "id"], if_not_exists=True)
        self.table("agent_events").create_index(["session_id", "id"], if_not_exists=True)
        self._add_missing_columns(
            {"problems": {"error": str}, "versions": {"source": str, "mtime_ns": int}, "evaluations": {"flags": str}}
        )
        self.table("meta").upsert({"key": "schema_version", "value": str(SCHEMA_VERSION)}, pk="key")

    def _add_missing_columns(self, wanted: dict[str, dict[str, type]]) -> None:
        """Histories written by an older kerneltui gain the columns added since."""
        for table, columns in wanted.items():
            have = self.table(table).columns_dict
            for name, kind in columns.items():
                if name not in have:
                    self.table(table).add_column(name, kind)

    # --- writing ------------------------------------------------------------------------------

    def ensure_problem(self, name: str, path: str, description: str = "", problem_hash: str | None = None) -> None:
        existing = self.conn.execute("SELECT 1 FROM problems WHERE name = ?", [name]).fetchone()
        if existing:
            changes = {"path": path, "description": description}
            if problem_hash is not None:
                changes["problem_hash"] = problem_hash
            self.table("problems").update(name, changes)
        else:
            self.table("problems").insert(
                {
                    "name": name,
                    "path": path,
                    "description": description,
                    "problem_hash": problem_hash,
                    "created": now(),
                }
            )

    def ensure_version(
        self,
        problem: str,
        name: str,
        path: Path,
        file_hash: str,
        notes: str = "",
        author: str = "",
        size: int = 0,
        source: str | None = None,
    ) -> int:
        """The version row for this content; the source is kept so diffs outlive the file."""
        row = self.conn.execute(
            "SELECT id, author FROM versions WHERE problem = ? AND name = ? AND hash = ?", [problem, name, file_hash]
        ).fetchone()
        if row:
            if author and not row[1]:  # the watcher recorded the file first; the agent says who wrote it
                self.conn.execute("UPDATE versions SET author = ? WHERE id = ?", [author, row[0]])
            return int(row[0])
        number = int(name[1:]) if name[1:].isdigit() else None
        return int(
            self.table("versions")
            .insert(
                {
                    "problem": problem,
                    "name": name,
                    "number": number,
                    "path": str(path),
                    "hash": file_hash,
                    "size": size,
                    "notes": notes,
                    "author": author,
                    "created": now(),
                    "deleted": None,
                    "source": source,
                }
            )
            .last_pk
            or 0
        )

    def start_evaluation(
        self,
        version_id: int,
        problem: str,
        version: str,
        file_hash: str,
        options: dict[str, Any] | None = None,
        status: str = "running",
    ) -> int:
        stamp = now()
        return int(
            self.table("evaluations")
            .insert(
                {
                    "version_id": version_id,
                    "problem": problem,
                    "version": version,
                    "hash": file_hash,
                    "status": status,
                    "queued": stamp,
                    "started": stamp if status == "running" else None,
                    "options": json.dumps(options or {}),
                }
            )
            .last_pk
            or 0
        )

    def add_rung(self, evaluation_id: int, idx: int, rung: RungResult) -> None:
        self.table("rungs").insert(
            {
                "evaluation_id": evaluation_id,
                "idx": idx,
                "name": rung.name,
                "ok": None if rung.ok is None else int(rung.ok),
                "skipped": rung.skipped,
                "err": rung.err,
                "seconds": rung.seconds,
                "metrics": json.dumps(rung.metrics, default=str),
                "log": rung.log,
            }
        )

    def finish_evaluation(self, evaluation_id: int, ev: Evaluation) -> None:
        """Stores the final result: key metrics, per-case results, timings, artifacts."""
        with self.transaction():
            self.conn.execute("DELETE FROM rungs WHERE evaluation_id = ?", [evaluation_id])
            for idx, rung in enumerate(ev.rungs):
                self.add_rung(evaluation_id, idx, rung)
            metrics = key_metrics(ev)
            metrics["vs_best"] = self._vs_best(ev, metrics.get("median_us"), evaluation_id)
            self.table("evaluations").update(
                evaluation_id,
                {
                    "status": ev.status,
                    "ok": int(ev.ok),
                    "failed_rung": ev.failed_rung,
                    "error": ev.error,
                    "device_kind": ev.device.get("kind"),
                    "device_name": ev.device.get("name"),
                    "arch": ev.device.get("arch"),
                    "sandbox": ev.sandbox,
                    "flags": json.dumps([flag.to_json() for flag in ev.flags]),
                    "problem_hash": ev.problem_hash,
                    "seeds": json.dumps(ev.seeds),
                    "device": json.dumps(ev.device),
                    "finished": now(),
                    "seconds": ev.seconds,
                    **metrics,
                },
            )
            self._store_details(evaluation_id, ev)

    def _store_details(self, evaluation_id: int, ev: Evaluation) -> None:
        correctness = ev.rung("correctness")
        for case in correctness.metrics.get("cases", []) if correctness else []:
            self.table("case_results").insert(
                {
                    "evaluation_id": evaluation_id,
                    "case_label": case.get("case"),
                    "seed": case.get("seed"),
                    "ok": int(bool(case.get("ok"))),
                    "err": case.get("err"),
                    **{k: case.get(k) for k in ("max_abs", "max_rel", "mse", "rmse", "psnr", "cosine")},
                }
            )
        bench, roof = ev.rung("benchmark"), ev.rung("roofline")
        roof_rows = {r["case"]: r for r in (roof.metrics.get("cases", []) if roof and roof.ok is not None else [])}
        for case in bench.metrics.get("cases", []) if bench and bench.ok else []:
            line = roof_rows.get(case["case"], {})
            self.table("timings").insert(
                {
                    "evaluation_id": evaluation_id,
                    "case_label": case["case"],
                    **{
                        k: case.get(k)
                        for k in (
                            "median_us",
                            "p20_us",
                            "p80_us",
                            "min_us",
                            "n",
                            "noise_pct",
                            "ref_median_us",
                            "speedup",
                        )
                    },
                    "gbps": line.get("gbps"),
                    "tflops": line.get("tflops"),
                    "roofline_pct": line.get("pct"),
                    "device_name": ev.device.get("name"),
                }
            )
        dumps = ev.rung("dumps")
        for item in dumps.metrics.get("files", []) if dumps and dumps.ok else []:
            self.table("artifacts").insert(
                {
                    "evaluation_id": evaluation_id,
                    "case_label": item.get("case"),
                    **{k: item.get(k) for k in ("kernel", "dsl", "kind", "path", "bytes")},
                }
            )

    def _vs_best(self, ev: Evaluation, median_us: float | None, evaluation_id: int) -> float | None:
        """Best earlier passing median on the same device over this one's (>1: faster than the best so far)."""
        if not median_us or ev.status != "pass":
            return None
        row = self.conn.execute(
            f"SELECT MIN(median_us) FROM evaluations WHERE problem = ? AND {MAY_BE_BEST} AND device_name = ? "
            "AND median_us IS NOT NULL AND id < ?",
            [ev.problem, ev.device.get("name"), evaluation_id],
        ).fetchone()
        return row[0] / median_us if row and row[0] else None

    def fail_evaluation(self, evaluation_id: int, error: str, status: str = "error") -> None:
        self.table("evaluations").update(evaluation_id, {"status": status, "ok": 0, "error": error, "finished": now()})

    def set_file_stamp(self, version_id: int, size: int, mtime_ns: int) -> None:
        self.conn.execute("UPDATE versions SET size = ?, mtime_ns = ? WHERE id = ?", [size, mtime_ns, version_id])

    def judged_file_stamps(self) -> dict[str, tuple[int, int]]:
        """path -> (size, mtime_ns) of each file's newest judged version: unchanged files need no reading."""
        rows = self.conn.execute(
            "SELECT v.path, v.size, v.mtime_ns, MAX(v.id) FROM versions v "
            "JOIN evaluations e ON e.version_id = v.id GROUP BY v.path"
        ).fetchall()
        return {r[0]: (r[1], r[2]) for r in rows if r[2] is not None}

    def set_problem_error(self, problem: str, error: str | None) -> None:
        self.conn.execute("UPDATE problems SET error = ? WHERE name = ?", [error, problem])

    def set_running(self, evaluation_id: int) -> None:
        self.table("evaluations").update(evaluation_id, {"status": "running", "started": now()})

    def requeue_interrupted(self) -> list[int]:
        """Evaluations left queued or running by a kerneltui that stopped: queued again, oldest first."""
        ids = [
            r[0]
            for r in self.conn.execute(
                "SELECT id FROM evaluations WHERE status IN ('queued', 'running') ORDER BY id"
            ).fetchall()
        ]
        if ids:
            self.conn.execute(
                f"UPDATE evaluations SET status = 'queued', started = NULL WHERE id IN ({','.join('?' * len(ids))})",
                ids,
            )
            self.conn.execute(f"DELETE FROM rungs WHERE evaluation_id IN ({','.join('?' * len(ids))})", ids)
        return ids

    def mark_deleted(self, problem: str, name: str) -> None:
        self.conn.execute(
            "UPDATE versions SET deleted = ? WHERE problem = ? AND name = ? AND deleted IS NULL", [now(), problem, name]
        )

    def mark_present(self, problem: str, name: str) -> None:
        self.conn.execute("UPDATE versions SET deleted = NULL WHERE problem = ? AND name = ?", [problem, name])

    def add_verdict(self, version_id: int, verdict: str, reason: str | None, who: str) -> int:
        row = self.conn.execute("SELECT problem, name, hash FROM versions WHERE id = ?", [version_id]).fetchone()
        if row is None:
            raise KeyError(f"no version {version_id}")
        return int(
            self.table("verdicts")
            .insert(
                {
                    "version_id": version_id,
                    "problem": row[0],
                    "version": row[1],
                    "hash": row[2],
                    "verdict": verdict,
                    "reason": reason,
                    "who": who,
                    "created": now(),
                }
            )
            .last_pk
            or 0
        )

    def add_guidance(self, problem: str, text: str, who: str) -> int:
        return int(
            self.table("guidance")
            .insert({"problem": problem, "text": text, "who": who, "created": now(), "delivered": None})
            .last_pk
            or 0
        )

    def start_agent_session(self, problem: str, backend: str, model: str, pid: int) -> int:
        row = {"problem": problem, "backend": backend, "model": model, "pid": pid, "started": now()}
        return int(self.table("agent_sessions").insert({**row, "versions": 0, "turns": 0}).last_pk or 0)

    def update_agent_session(self, session_id: int, **changes: Any) -> None:
        self.table("agent_sessions").update(session_id, changes)

    def add_agent_event(self, session_id: int, problem: str, kind: str, text: str, data: dict[str, Any]) -> int:
        event = {"session_id": session_id, "problem": problem, "kind": kind, "text": text, "created": now()}
        return int(self.table("agent_events").insert({**event, "data": json.dumps(data, default=str)}).last_pk or 0)

    def take_guidance(self, problem: str, session_id: int) -> list[dict[str, Any]]:
        """Guidance not yet delivered to any agent, marked delivered to this session."""
        with self.transaction():
            rows = self.rows("SELECT * FROM guidance WHERE problem = ? AND delivered IS NULL ORDER BY id", [problem])
            if rows:
                stamp = f"{now()} session {session_id}"
                ids = [r["id"] for r in rows]
                self.conn.execute(
                    f"UPDATE guidance SET delivered = ? WHERE id IN ({','.join('?' * len(ids))})", [stamp, *ids]
                )
        return rows

    def verdicts_after(self, problem: str, after_id: int, limit: int = 20) -> list[dict[str, Any]]:
        rows = self.rows(
            "SELECT * FROM verdicts WHERE problem = ? AND id > ? ORDER BY id DESC LIMIT ?", [problem, after_id, limit]
        )
        return rows[::-1]

    # --- reading ------------------------------------------------------------------------------

    def agent_sessions(self, problem: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        where, params = ("WHERE problem = ?", [problem]) if problem else ("", [])
        return self.rows(f"SELECT * FROM agent_sessions {where} ORDER BY id DESC LIMIT ?", [*params, limit])

    def latest_agent(self, problem: str, limit: int = 400) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The problem's newest agent session and its last events (none in a history from before agents)."""
        try:
            sessions = self.agent_sessions(problem, limit=1)
            return (sessions[0], self.agent_events(sessions[0]["id"], limit)) if sessions else (None, [])
        except sqlite3.OperationalError:
            return None, []

    def agent_events(self, session_id: int, limit: int = 400) -> list[dict[str, Any]]:
        rows = self.rows(
            "SELECT * FROM agent_events WHERE session_id = ? ORDER BY id DESC LIMIT ?", [session_id, limit]
        )
        for row in rows:
            row["data"] = json.loads(row["data"] or "{}")
        return rows[::-1]

    def data_version(self) -> int:
        """Changes whenever another connection commits: a cheap way to notice the CLI's writes."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def rows(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        cursor = self.conn.execute(sql, params or [])
        columns = [c[0] for c in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

    def evaluation(self, evaluation_id: int) -> dict[str, Any] | None:
        found = self.rows("SELECT * FROM evaluations WHERE id = ?", [evaluation_id])
        return found[0] if found else None

    def latest_version(self, problem: str, name: str) -> dict[str, Any] | None:
        found = self.rows(
            "SELECT * FROM versions WHERE problem = ? AND name = ? ORDER BY id DESC LIMIT 1", [problem, name]
        )
        return found[0] if found else None

    def version_rows(self, problem: str) -> list[dict[str, Any]]:
        """One row per version name (its newest content), with its newest evaluation and verdict."""
        return self.rows(
            """
            SELECT v.id AS version_id, v.name, v.number, v.path, v.notes, v.author, v.deleted, v.hash AS file_hash,
                   v.created AS version_created,
                   e.id AS evaluation_id, e.status, e.failed_rung, e.error, e.max_abs, e.median_us,
                   e.ref_median_us, e.speedup, e.roofline_pct, e.device_name, e.finished, e.queued, e.started,
                   e.flags, e.sandbox,
                   d.verdict, d.reason AS verdict_reason, d.created AS verdict_time,
                   (SELECT name FROM rungs r WHERE r.evaluation_id = e.id ORDER BY idx DESC LIMIT 1) AS last_rung,
                   (SELECT noise_pct FROM timings t WHERE t.evaluation_id = e.id ORDER BY t.id LIMIT 1) AS noise_pct
            FROM versions v
            LEFT JOIN evaluations e ON e.id = (SELECT MAX(id) FROM evaluations WHERE version_id = v.id)
            LEFT JOIN verdicts d ON d.id = (SELECT MAX(id) FROM verdicts WHERE version_id = v.id)
            WHERE v.problem = ?
              AND v.id = (SELECT MAX(id) FROM versions w WHERE w.problem = v.problem AND w.name = v.name)
            ORDER BY v.number DESC, v.name DESC
            """,
            [problem],
        )

    def problem_rows(self) -> list[dict[str, Any]]:
        """Every problem with its newest evaluation, queued work, and its best passing median and % of roofline
        on the GPU of its newest timing (`best_device`): times from two kinds of GPU are never compared.

        A few passes over evaluations (grouped), not a subquery per problem: this runs before the first screen
        of a history with thousands of versions.
        """
        return self.rows(
            f"""
            WITH agg AS (
                SELECT problem, MAX(id) AS latest_id, SUM(status IN ('queued', 'running')) AS pending,
                       MAX(CASE WHEN median_us IS NOT NULL THEN id END) AS timed_id
                FROM evaluations GROUP BY problem),
            gpu AS (SELECT a.problem, e.device_name FROM agg a JOIN evaluations e ON e.id = a.timed_id),
            best AS (
                SELECT evaluations.problem, MIN(median_us) AS best_us, MAX(roofline_pct) AS best_pct
                FROM evaluations JOIN gpu g
                    ON g.problem = evaluations.problem AND g.device_name IS evaluations.device_name
                WHERE {MAY_BE_BEST} GROUP BY evaluations.problem),
            counts AS (SELECT problem, COUNT(DISTINCT name) AS versions FROM versions GROUP BY problem)
            SELECT p.name, p.path, p.description, p.error, c.versions,
                   l.version AS latest_version, l.status AS latest_status, l.error AS latest_error,
                   l.roofline_pct AS latest_pct, b.best_us, b.best_pct, g.device_name AS best_device, a.pending
            FROM problems p
            LEFT JOIN agg a ON a.problem = p.name
            LEFT JOIN gpu g ON g.problem = p.name
            LEFT JOIN best b ON b.problem = p.name
            LEFT JOIN counts c ON c.problem = p.name
            LEFT JOIN evaluations l ON l.id = a.latest_id
            ORDER BY p.name
            """
        )

    def trend_rows(self, problem: str) -> list[dict[str, Any]]:
        """Per version, GPU (its newest timed evaluation there) and bench case: median and % of roofline."""
        return self.rows(
            """
            SELECT e.version, v.number, t.case_label, t.median_us, t.roofline_pct, e.status, e.device_name
            FROM timings t JOIN evaluations e ON e.id = t.evaluation_id JOIN versions v ON v.id = e.version_id
            WHERE e.problem = ? AND e.id IN (
                SELECT MAX(id) FROM evaluations WHERE problem = ? AND median_us IS NOT NULL
                GROUP BY version, device_name)
            ORDER BY v.number, t.id
            """,
            [problem, problem],
        )

    def artifacts(self, evaluation_id: int) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM artifacts WHERE evaluation_id = ? ORDER BY id", [evaluation_id])

    def guidance(self, problem: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        if problem:
            return self.rows("SELECT * FROM guidance WHERE problem = ? ORDER BY id DESC LIMIT ?", [problem, limit])
        return self.rows("SELECT * FROM guidance ORDER BY id DESC LIMIT ?", [limit])

    def verdicts(self, version_id: int) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM verdicts WHERE version_id = ? ORDER BY id DESC", [version_id])

    def pending_count(self, problem: str | None = None) -> int:
        """Evaluations queued or running (of one problem, or of all)."""
        sql = "SELECT COUNT(*) FROM evaluations WHERE status IN ('queued', 'running')"
        if problem is None:
            return int(self.conn.execute(sql).fetchone()[0])
        return int(self.conn.execute(sql + " AND problem = ?", [problem]).fetchone()[0])

    def best_medians(self, problem: str) -> dict[str, float]:
        """The best median (µs) of a problem on each device: a version is judged again before it beats it."""
        found = self.rows(
            f"SELECT device_name, MIN(median_us) AS best FROM evaluations WHERE problem = ? AND {MAY_BE_BEST} "
            "AND median_us IS NOT NULL GROUP BY device_name",
            [problem],
        )
        return {str(r["device_name"]): float(r["best"]) for r in found if r["device_name"]}

    def best_passing(self, problem: str, device_name: str | None = None) -> dict[str, Any] | None:
        """The fastest passing evaluation that nothing flagged (or whose version the person approved), on
        `device_name` or else the GPU of the problem's newest timing: times of two kinds of GPU never race."""
        device = device_name or self.newest_device(problem)
        found = self.rows(
            f"SELECT * FROM evaluations WHERE problem = ? AND {MAY_BE_BEST} AND median_us IS NOT NULL "
            "AND device_name IS ? ORDER BY median_us LIMIT 1",
            [problem, device],
        )
        return found[0] if found else None

    def newest_device(self, problem: str) -> str | None:
        """The GPU of the problem's newest timed evaluation (None: nothing timed yet)."""
        found = self.conn.execute(
            "SELECT device_name FROM evaluations WHERE problem = ? AND median_us IS NOT NULL ORDER BY id DESC LIMIT 1",
            [problem],
        ).fetchone()
        return None if found is None else found[0]

    def best_passing_text(self, problem: str) -> str | None:
        """'v002 (52 µs, 91% of roofline)': the fastest passing version, as agents and people read it."""
        from harness.report import duration_us

        best = self.best_passing(problem)
        if best is None:
            return None
        pct = f", {best['roofline_pct']:.0f}% of roofline" if best.get("roofline_pct") else ""
        return f"{best['version']} ({duration_us(best['median_us'])}{pct})"

    def last_approved(self, problem: str) -> dict[str, Any] | None:
        found = self.rows(
            "SELECT v.* FROM verdicts d JOIN versions v ON v.id = d.version_id WHERE d.problem = ? "
            "AND d.verdict = 'approved' ORDER BY d.id DESC LIMIT 1",
            [problem],
        )
        return found[0] if found else None

    def history(self, problem: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Evaluations, newest first, with their version's latest verdict."""
        where, params = ("WHERE e.problem = ?", [problem]) if problem else ("", [])
        sql = f"""
            SELECT e.*, v.path AS path, v.notes AS notes, v.author AS author,
                   (SELECT verdict FROM verdicts d WHERE d.version_id = e.version_id ORDER BY d.id DESC LIMIT 1)
                       AS verdict,
                   (SELECT reason FROM verdicts d WHERE d.version_id = e.version_id ORDER BY d.id DESC LIMIT 1)
                       AS verdict_reason
            FROM evaluations e JOIN versions v ON v.id = e.version_id
            {where} ORDER BY e.id DESC {"LIMIT ?" if limit else ""}
        """
        cursor = self.conn.execute(sql, [*params, *([limit] if limit else [])])
        columns = [c[0] for c in cursor.description]
        return [history_entry(dict(zip(columns, row, strict=True))) for row in cursor.fetchall()]

    def rungs(self, evaluation_id: int) -> list[RungResult]:
        rows = self.conn.execute(
            "SELECT name, ok, skipped, err, seconds, metrics, log FROM rungs WHERE evaluation_id = ? ORDER BY idx",
            [evaluation_id],
        ).fetchall()
        return [
            RungResult(
                name=r[0],
                ok=None if r[1] is None else bool(r[1]),
                skipped=r[2],
                err=r[3],
                seconds=r[4] or 0.0,
                metrics=json.loads(r[5] or "{}"),
                log=r[6],
            )
            for r in rows
        ]

    def count(self, table: str) -> int:
        return int(self.conn.execute(f"SELECT COUNT(*) FROM [{table}]").fetchone()[0])


def key_metrics(ev: Evaluation) -> dict[str, Any]:
    out: dict[str, Any] = {}
    correctness = ev.rung("correctness")
    if correctness and "max_abs" in correctness.metrics:
        for key in ("max_abs", "max_rel", "rmse", "psnr", "cosine"):
            out[key] = correctness.metrics.get(key)
    bench = ev.rung("benchmark")
    if bench and bench.ok:
        for key in ("median_us", "ref_median_us", "speedup"):
            out[key] = bench.metrics.get(key)
    roof = ev.rung("roofline")
    if roof and roof.ok is not None and "pct" in roof.metrics:
        out["roofline_pct"] = roof.metrics["pct"]
    return out


def parse_flags(text: Any) -> list[dict[str, str]]:
    """The flags column: [{"name", "reason"}] (empty for none, or for a history older than flags)."""
    try:
        flags = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return []
    return [{"name": str(f.get("name")), "reason": str(f.get("reason"))} for f in flags if isinstance(f, dict)]


def history_entry(row: dict[str, Any]) -> dict[str, Any]:
    """The `kerneltui history --json` shape of one evaluation."""
    return {
        "id": row["id"],
        "problem": row["problem"],
        "version": row["version"],
        "hash": row["hash"],
        "path": row.get("path"),
        "ok": None if row["ok"] is None else bool(row["ok"]),
        "status": row["status"],
        "failed_rung": row["failed_rung"],
        "error": row["error"],
        "metrics": {k: row.get(k) for k in KEY_METRICS},
        "device": row["device_name"],
        "sandbox": row["sandbox"],
        "flags": parse_flags(row.get("flags")),
        "notes": row.get("notes"),
        "author": row.get("author"),
        "verdict": row.get("verdict"),
        "verdict_reason": row.get("verdict_reason"),
        "time": row["finished"] or row["started"] or row["queued"],
    }
