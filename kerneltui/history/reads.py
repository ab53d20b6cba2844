"""Reading the history: the rows the dashboard, the CLI and the agents show."""

from __future__ import annotations

import json
import re
from typing import Any

from harness.contract.results import RungResult
from kerneltui.history.connection import Connection
from kerneltui.history.schema import KEY_METRICS

# An evaluation judged against another problem.py than the one on disk now (e: evaluations, p: problems).
STALE = (
    "(COALESCE(e.problem_hash, '') != '' AND COALESCE(p.problem_hash, '') != '' AND e.problem_hash != p.problem_hash)"
)


def natural_key(name: str) -> list[str | int]:
    """2_Matmul before 10_Conv: runs of digits compare as numbers (re.split keeps text at even places)."""
    return [int(part) if index % 2 else part.lower() for index, part in enumerate(re.split(r"(\d+)", name))]


def may_be_best(evaluation: str = "evaluations") -> str:
    """The one definition of which evaluations may be "the best": passing, and unflagged or approved by the person
    (the newest verdict on its version). `evaluation`: the evaluations table's name or alias in the query."""
    e = evaluation
    return (
        f"({e}.status = 'pass' AND ({e}.flags IS NULL OR {e}.flags = '[]' OR (SELECT d.verdict FROM verdicts d "
        f"WHERE d.version_id = {e}.version_id ORDER BY d.id DESC LIMIT 1) = 'approved'))"
    )


MAY_BE_BEST = may_be_best()


class VersionReads(Connection):
    """Reads of versions: by name, their rows with their newest evaluation, their text as judged."""

    def latest_version(self, problem: str, name: str) -> dict[str, Any] | None:
        return self.first_row(
            "SELECT * FROM versions WHERE problem = ? AND name = ? ORDER BY id DESC LIMIT 1", [problem, name]
        )

    def version_rows(self, problem: str) -> list[dict[str, Any]]:
        """One row per version name (its newest content), with its newest evaluation and verdict."""
        return self.rows(
            f"""
            SELECT v.id AS version_id, v.name, v.number, v.path, v.notes, v.author, v.deleted, v.hash AS file_hash,
                   v.created AS version_created,
                   e.id AS evaluation_id, e.status, e.failed_rung, e.error, e.max_abs, e.median_us,
                   e.ref_median_us, e.speedup, e.roofline_pct, e.device_name, e.finished, e.queued, e.started,
                   e.race, e.vs_best,
                   e.flags, e.sandbox, {STALE} AS stale, COALESCE({may_be_best("e")}, 0) AS may_be_best,
                   d.verdict, d.reason AS verdict_reason, d.created AS verdict_time,
                   (SELECT name FROM rungs r WHERE r.evaluation_id = e.id ORDER BY idx DESC LIMIT 1) AS last_rung,
                   (SELECT noise_pct FROM timings t WHERE t.evaluation_id = e.id ORDER BY t.id LIMIT 1) AS noise_pct,
                   (SELECT MAX(p.id) FROM evaluations p WHERE p.version_id = v.id
                      AND json_extract(p.options, '$.kind') = 'profile'
                      AND p.status NOT IN ('queued', 'running')) AS profile_id
            FROM versions v
            LEFT JOIN evaluations e ON e.id = (
                SELECT MAX(id) FROM evaluations
                WHERE version_id = v.id AND json_extract(options, '$.kind') IS NOT 'profile'
            )
            LEFT JOIN verdicts d ON d.id = (SELECT MAX(id) FROM verdicts WHERE version_id = v.id)
            LEFT JOIN problems p ON p.name = v.problem
            WHERE v.problem = ?
              AND v.id = (SELECT MAX(id) FROM versions w WHERE w.problem = v.problem AND w.name = v.name)
            ORDER BY v.number DESC, v.name DESC
            """,
            [problem],
        )

    def version_source(self, version_id: int) -> str:
        """The text of a version as it was judged ('' when unknown)."""
        found = self.conn.execute("SELECT source FROM versions WHERE id = ?", [version_id]).fetchone()
        return (found[0] or "") if found else ""

    def earlier_content(self, version_id: int) -> dict[str, Any] | None:
        """The content this version's file held before it was rewritten (the same problem and name, judged or
        not): its version row with its newest evaluation's id, or None for a file written once."""
        return self.first_row(
            """
            SELECT w.id AS version_id, w.name, w.created,
                   (SELECT MAX(e.id) FROM evaluations e WHERE e.version_id = w.id) AS evaluation_id
            FROM versions v JOIN versions w ON w.problem = v.problem AND w.name = v.name AND w.id < v.id
            WHERE v.id = ? ORDER BY w.id DESC LIMIT 1
            """,
            [version_id],
        )

    def version_path(self, version_id: int) -> str | None:
        found = self.conn.execute("SELECT path FROM versions WHERE id = ?", [version_id]).fetchone()
        return found[0] if found else None

    def present_versions(self) -> list[dict[str, Any]]:
        """(problem, name, path) of every version whose file is not known to be deleted."""
        return self.rows("SELECT DISTINCT problem, name, path FROM versions WHERE deleted IS NULL")

    def max_version_number(self, problem: str) -> int:
        found = self.conn.execute("SELECT MAX(number) FROM versions WHERE problem = ?", [problem]).fetchone()
        return int(found[0] or 0)


class Reads(VersionReads):
    def evaluation(self, evaluation_id: int) -> dict[str, Any] | None:
        return self.first_row("SELECT * FROM evaluations WHERE id = ?", [evaluation_id])

    def was_judged(self, version_id: int) -> bool:
        """Whether this version (this content) has an evaluation, in any state."""
        found = self.conn.execute("SELECT 1 FROM evaluations WHERE version_id = ? LIMIT 1", [version_id]).fetchone()
        return found is not None

    def latest_evaluation(
        self,
        problem: str | None = None,
        version: str | None = None,
        version_id: int | None = None,
        statuses: tuple[str, ...] = (),
    ) -> dict[str, Any] | None:
        """The newest evaluation of a version, by its id or by problem and name; of these statuses if given."""
        where = ["version_id = ?"] if version_id is not None else ["problem = ?", "version = ?"]
        params: list[Any] = [version_id] if version_id is not None else [problem, version]
        if statuses:
            where.append(f"status IN ({', '.join('?' * len(statuses))})")
            params += list(statuses)
        return self.first_row(f"SELECT * FROM evaluations WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT 1", params)

    def finished_since(self, problem: str, since: str, statuses: tuple[str, ...]) -> list[dict[str, Any]]:
        """Evaluations of a problem that ended (in one of these statuses) at or after `since`, oldest first."""
        marks = ", ".join("?" * len(statuses))
        return self.rows(
            f"SELECT * FROM evaluations WHERE problem = ? AND finished >= ? AND status IN ({marks})"
            " AND json_extract(options, '$.kind') IS NOT 'profile' ORDER BY id",
            [problem, since, *statuses],
        )

    def versions_judged_since(self, problem: str, since: str, statuses: tuple[str, ...]) -> int:
        """Versions first recorded at or after `since` with an evaluation that ended (profiles aside)."""
        marks = ", ".join("?" * len(statuses))
        found = self.conn.execute(
            f"""SELECT COUNT(DISTINCT e.version_id) FROM evaluations e JOIN versions v ON v.id = e.version_id
                WHERE e.problem = ? AND v.created >= ? AND e.status IN ({marks})
                  AND json_extract(e.options, '$.kind') IS NOT 'profile'""",
            [problem, since, *statuses],
        ).fetchone()
        return int(found[0] or 0)

    def case_results(self, evaluation_id: int) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM case_results WHERE evaluation_id = ? ORDER BY id", [evaluation_id])

    def recent_verdicts(self, problem: str, limit: int) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM verdicts WHERE problem = ? ORDER BY id DESC LIMIT ?", [problem, limit])

    def problem_rows(self) -> list[dict[str, Any]]:
        """Every problem with its newest evaluation, queued work, and its best passing median and % of roofline
        on the GPU of its newest timing (`best_device`): times from two kinds of GPU are never compared.

        A few passes over evaluations (grouped), not a subquery per problem: this runs before the first screen
        of a history with thousands of versions. In natural order: 1_, 2_, ... 10_, 100_ (KernelBench's names).
        """
        rows = self.rows(
            f"""
            WITH agg AS (
                SELECT problem, SUM(status IN ('queued', 'running')) AS pending,
                       MAX(CASE WHEN median_us IS NOT NULL THEN id END) AS timed_id
                FROM evaluations GROUP BY problem),
            gpu AS (SELECT a.problem, e.device_name FROM agg a JOIN evaluations e ON e.id = a.timed_id),
            best AS (
                SELECT evaluations.problem, MIN(median_us) AS best_us, MAX(roofline_pct) AS best_pct
                FROM evaluations JOIN gpu g
                    ON g.problem = evaluations.problem AND g.device_name IS evaluations.device_name
                WHERE {MAY_BE_BEST} GROUP BY evaluations.problem),
            counts AS (SELECT problem, COUNT(DISTINCT name) AS versions FROM versions GROUP BY problem),
            -- "latest" is the newest file (the highest vNNN still on disk), not the newest evaluation
            top AS (SELECT problem, MAX(number) AS number FROM versions WHERE deleted IS NULL GROUP BY problem),
            newest AS (
                SELECT v.problem, MAX(v.id) AS version_id FROM versions v
                JOIN top t ON t.problem = v.problem AND t.number = v.number GROUP BY v.problem),
            judged AS (
                SELECT n.problem, MAX(e.id) AS id FROM newest n JOIN evaluations e ON e.version_id = n.version_id
                WHERE json_extract(e.options, '$.kind') IS NOT 'profile' GROUP BY n.problem)
            SELECT p.name, p.path, p.description, p.error, c.versions,
                   nv.name AS latest_version, l.status AS latest_status, l.error AS latest_error,
                   l.roofline_pct AS latest_pct, b.best_us, b.best_pct, g.device_name AS best_device, a.pending
            FROM problems p
            LEFT JOIN agg a ON a.problem = p.name
            LEFT JOIN gpu g ON g.problem = p.name
            LEFT JOIN best b ON b.problem = p.name
            LEFT JOIN counts c ON c.problem = p.name
            LEFT JOIN newest n ON n.problem = p.name
            LEFT JOIN versions nv ON nv.id = n.version_id
            LEFT JOIN judged j ON j.problem = p.name
            LEFT JOIN evaluations l ON l.id = j.id
            ORDER BY p.name
            """
        )
        return sorted(rows, key=lambda row: natural_key(str(row["name"])))

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
        """Its dumped files, each with `pruned` (when `kerneltui gc` or the dumps budget removed them, else None)."""
        return self.rows(
            "SELECT a.*, p.pruned FROM artifacts a LEFT JOIN pruned_dumps p ON p.evaluation_id = a.evaluation_id "
            "WHERE a.evaluation_id = ? ORDER BY a.id",
            [evaluation_id],
        )

    def rewound_between(self, problem: str, after: str | None, until: str | None) -> dict[str, Any] | None:
        """The last rewind of the problem's agent after one time and up to another (ISO strings; None: open)."""
        rows = self.rows(
            "SELECT * FROM rewinds WHERE problem = ? AND created > ? AND created <= ? ORDER BY id DESC LIMIT 1",
            [problem, after or "", until or "9999"],
        )
        return rows[0] if rows else None

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

    def best_request(self, problem: str) -> dict[str, Any]:
        """What a judge needs to know of the best, in a request's keys: the best median on each device (a faster
        version is judged again) and the best version's file, raced back to back with a passing version."""
        race: dict[str, dict[str, str]] = {}
        medians = self.best_medians(problem)
        for device in medians:
            best = self.best_passing(problem, device)
            if best is None:
                continue
            found = self.conn.execute("SELECT path FROM versions WHERE id = ?", [best["version_id"]]).fetchone()
            if found and found[0]:
                race[device] = {"path": str(found[0]), "hash": str(best["hash"]), "version": str(best["version"])}
        return {"best_us": medians, "race_with": race}

    def best_passing(self, problem: str, device_name: str | None = None) -> dict[str, Any] | None:
        """The fastest passing evaluation that nothing flagged (or whose version the person approved), on
        `device_name` or else the GPU of the problem's newest timing: times of two kinds of GPU never race."""
        device = device_name or self.newest_device(problem)
        return self.first_row(
            f"SELECT * FROM evaluations WHERE problem = ? AND {MAY_BE_BEST} AND median_us IS NOT NULL "
            "AND device_name IS ? ORDER BY median_us LIMIT 1",
            [problem, device],
        )

    def newest_device(self, problem: str) -> str | None:
        """The GPU of the problem's newest timed evaluation (None: nothing timed yet)."""
        found = self.conn.execute(
            "SELECT device_name FROM evaluations WHERE problem = ? AND median_us IS NOT NULL ORDER BY id DESC LIMIT 1",
            [problem],
        ).fetchone()
        return None if found is None else found[0]

    def best_passing_text(self, problem: str) -> str | None:
        """'v002 (52 µs, 91% of roofline)': the fastest passing version, as agents and people read it."""
        from harness.contract.units import duration_us

        best = self.best_passing(problem)
        if best is None:
            return None
        pct = f", {best['roofline_pct']:.0f}% of roofline" if best.get("roofline_pct") else ""
        return f"{best['version']} ({duration_us(best['median_us'])}{pct})"

    def last_standing_verdict(self, problem: str) -> dict[str, Any] | None:
        """The newest approval or rejection in the problem that is still its version's verdict (undo's target)."""
        return self.first_row(
            "SELECT d.* FROM verdicts d WHERE d.problem = ? AND d.verdict IN ('approved', 'rejected') "
            "AND d.id = (SELECT MAX(id) FROM verdicts WHERE version_id = d.version_id) ORDER BY d.id DESC LIMIT 1",
            [problem],
        )

    def last_approved(self, problem: str) -> dict[str, Any] | None:
        return self.first_row(
            "SELECT v.* FROM verdicts d JOIN versions v ON v.id = d.version_id WHERE d.problem = ? "
            "AND d.verdict = 'approved' ORDER BY d.id DESC LIMIT 1",
            [problem],
        )

    def best_approved(self, problem: str) -> dict[str, Any] | None:
        """The version whose standing verdict is an approval with the fastest passing evaluation (the newest
        approval where none was timed): its row, with `path`."""
        return self.first_row(
            "SELECT v.*, (SELECT MIN(e.median_us) FROM evaluations e WHERE e.version_id = v.id "
            "AND e.status = 'pass') AS best_us FROM versions v WHERE v.problem = ? AND (SELECT d.verdict "
            "FROM verdicts d WHERE d.version_id = v.id ORDER BY d.id DESC LIMIT 1) = 'approved' "
            "ORDER BY best_us IS NULL, best_us, (SELECT MAX(d.id) FROM verdicts d WHERE d.version_id = v.id) DESC "
            "LIMIT 1",
            [problem],
        )

    def history(self, problem: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Evaluations, newest first, with their version's latest verdict."""
        where, params = ("WHERE e.problem = ?", [problem]) if problem else ("", [])
        sql = f"""
            SELECT e.*, v.path AS path, v.notes AS notes, v.author AS author, {STALE} AS stale,
                   (SELECT verdict FROM verdicts d WHERE d.version_id = e.version_id ORDER BY d.id DESC LIMIT 1)
                       AS verdict,
                   (SELECT reason FROM verdicts d WHERE d.version_id = e.version_id ORDER BY d.id DESC LIMIT 1)
                       AS verdict_reason,
                   (SELECT pruned FROM pruned_dumps WHERE evaluation_id = e.id) AS dumps_pruned,
                   EXISTS (SELECT 1 FROM artifacts a WHERE a.evaluation_id = e.id) AS dumped
            FROM evaluations e JOIN versions v ON v.id = e.version_id LEFT JOIN problems p ON p.name = e.problem
            {where} ORDER BY e.id DESC {"LIMIT ?" if limit else ""}
        """
        cursor = self.conn.execute(sql, [*params, *([limit] if limit else [])])
        columns = [c[0] for c in cursor.description]
        return [history_entry(dict(zip(columns, row, strict=True))) for row in cursor.fetchall()]

    def latest_profile(self, version_id: int) -> RungResult | None:
        """The profile rung of the newest profile of this version (`kerneltui profile`), if it has one."""
        found = self.latest_profile_id(version_id)
        rungs = self.rungs(found) if found else []
        return next((r for r in rungs if r.name == "profile"), None)

    def best_profile(
        self, problem: str, version_id: int, device_name: str | None
    ) -> tuple[str, RungResult | None] | None:
        """The best version on `device_name` and its newest profile (None where it has none), to set a profile of
        another version beside; None where the version is the best itself or there is no best."""
        best = self.best_passing(problem, device_name)
        if best is None or best["version_id"] == version_id:
            return None
        return str(best["version"]), self.latest_profile(int(best["version_id"]))

    def latest_profile_id(self, version_id: int) -> int | None:
        """The newest finished profile evaluation of this version."""
        found = self.conn.execute(
            """SELECT id FROM evaluations WHERE version_id = ? AND json_extract(options, '$.kind') = 'profile'
               AND status NOT IN ('queued', 'running') ORDER BY id DESC LIMIT 1""",
            [version_id],
        ).fetchone()
        return int(found[0]) if found else None

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


def parse_flags(text: Any) -> list[dict[str, str]]:
    """The flags column: [{"name", "reason"}] (empty for none, or for a history older than flags)."""
    try:
        flags = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return []
    return [{"name": str(f.get("name")), "reason": str(f.get("reason"))} for f in flags if isinstance(f, dict)]


def resource_rows(store: Reads, problem: str) -> list[dict[str, Any]]:
    """Per version (its newest evaluation that compiled): the largest kernel's registers per thread and the
    bytes its kernels spill, in trend_rows' shape (case_label names the line): what changes with no GPU."""
    found = store.rows(
        """
        SELECT v.number, r.metrics FROM rungs r JOIN evaluations e ON e.id = r.evaluation_id
        JOIN versions v ON v.id = e.version_id
        WHERE e.problem = ? AND r.name = 'compile' AND r.ok = 1 AND e.id IN (
            SELECT MAX(id) FROM evaluations WHERE problem = ? AND json_extract(options, '$.kind') IS NOT 'profile'
            GROUP BY version)
        ORDER BY v.number
        """,
        [problem, problem],
    )
    out: list[dict[str, Any]] = []
    for row in found:
        kernels = [k for k in json.loads(row["metrics"] or "{}").get("kernels", []) if isinstance(k, dict)]
        registers = [k["registers"] for k in kernels if isinstance(k.get("registers"), int | float)]
        if not registers:
            continue
        spilled = sum(k.get("spill_bytes") or 0 for k in kernels if isinstance(k.get("spill_bytes"), int | float))
        out.append({"number": row["number"], "case_label": "registers per thread", "value": max(registers)})
        out.append({"number": row["number"], "case_label": "bytes spilled", "value": spilled})
    return out


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
        "stale": bool(row.get("stale")),  # judged against an older problem.py
        "dumps": "pruned" if row.get("dumps_pruned") else "kept" if row.get("dumped") else None,
        "time": row["finished"] or row["started"] or row["queued"],
    }
