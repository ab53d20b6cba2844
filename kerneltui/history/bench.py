"""Agents measured on a suite: runs, their (problem, agent) entries, and what each entry's folder holds."""

from __future__ import annotations

import json
from typing import Any

from kerneltui.history.connection import Connection, now


class BenchLog(Connection):
    def start_bench_run(self, suite: str, settings: dict[str, Any]) -> int:
        row = {"suite": suite, "started": now(), "settings": json.dumps(settings)}
        return int(self.table("bench_runs").insert(row).last_pk or 0)

    def end_bench_run(self, run_id: int, note: str = "") -> None:
        self.table("bench_runs").update(run_id, {"ended": now(), "note": note})

    def add_bench_entry(self, run_id: int, problem: str, agent: str, spec: str, folder: str) -> int:
        row = {"run_id": run_id, "problem": problem, "agent": agent, "spec": spec, "folder": folder}
        return int(self.table("bench_entries").insert(row).last_pk or 0)

    def update_bench_entry(self, entry_id: int, **changes: Any) -> None:
        self.table("bench_entries").update(entry_id, changes)

    def bench_runs(self, limit: int = 20) -> list[dict[str, Any]]:
        rows = self.rows("SELECT * FROM bench_runs ORDER BY id DESC LIMIT ?", [limit])
        for row in rows:
            row["settings"] = json.loads(row["settings"] or "{}")
        return rows

    def bench_entries(self, run_id: int) -> list[dict[str, Any]]:
        """The run's entries, each with its agent session's figures (tokens, cost, when it started)."""
        return self.rows(
            """SELECT b.*, s.started AS session_started, s.input_tokens, s.output_tokens, s.cost_usd, s.turns
               FROM bench_entries b LEFT JOIN agent_sessions s ON s.id = b.session_id
               WHERE b.run_id = ? ORDER BY b.id""",
            [run_id],
        )

    def entry_evaluations(self, folder: str) -> list[dict[str, Any]]:
        """Each version of the folder's problem with its newest evaluation (profiles aside), oldest first."""
        return self.rows(
            """SELECT v.name, v.number, e.status, e.flags, e.speedup, e.roofline_pct, e.median_us, e.finished,
                      e.device_name, d.verdict
               FROM versions v
               LEFT JOIN evaluations e ON e.id = (
                   SELECT MAX(id) FROM evaluations
                   WHERE version_id = v.id AND json_extract(options, '$.kind') IS NOT 'profile')
               LEFT JOIN verdicts d ON d.id = (SELECT MAX(id) FROM verdicts WHERE version_id = v.id)
               WHERE v.problem = ? AND v.id = (SELECT MAX(id) FROM versions w WHERE w.problem = v.problem
                                               AND w.name = v.name)
               ORDER BY v.number""",
            [folder],
        )
