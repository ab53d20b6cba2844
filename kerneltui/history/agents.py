"""Agent sessions and their events, and what reaches an agent: guidance and verdicts not yet seen."""

from __future__ import annotations

import json
import sqlite3
import statistics
from datetime import UTC, datetime
from typing import Any

from kerneltui.history.connection import Connection, now


class AgentLog(Connection):
    def start_agent_session(self, problem: str, backend: str, model: str, pid: int) -> int:
        row = {"problem": problem, "backend": backend, "model": model, "pid": pid, "started": now()}
        return int(self.table("agent_sessions").insert({**row, "versions": 0, "turns": 0}).last_pk or 0)

    def update_agent_session(self, session_id: int, **changes: Any) -> None:
        self.table("agent_sessions").update(session_id, changes)

    def add_agent_event(self, session_id: int, problem: str, kind: str, text: str, data: dict[str, Any]) -> int:
        event = {"session_id": session_id, "problem": problem, "kind": kind, "text": text, "created": now()}
        return int(self.table("agent_events").insert({**event, "data": json.dumps(data, default=str)}).last_pk or 0)

    def grant_after(self, session_id: int, event_id: int) -> dict[str, Any] | None:
        """The first budget the person granted this session after event `event_id` (its data: versions,
        cost_usd), if any."""
        row = self.first_row(
            "SELECT * FROM agent_events WHERE session_id = ? AND kind = 'grant' AND id > ? ORDER BY id LIMIT 1",
            [session_id, event_id],
        )
        return json.loads(row["data"] or "{}") if row else None

    def grant(self, session_id: int, problem: str, grant: dict[str, Any]) -> str | None:
        """Records more budget (`grant`: versions, cost_usd) for a session whose agent is paused on a spent one,
        which its host reads and goes on with: what was granted ("2 more versions"); None where it is not paused."""
        with self.transaction():
            if not self.is_paused(session_id):
                return None
            said = granted_text(grant)
            self.add_agent_event(session_id, problem, "grant", f"granted {said}", grant)
        return said

    def is_paused(self, session_id: int) -> bool:
        """Whether the session's agent paused on a spent budget and nothing was granted since."""
        found = self.conn.execute(
            "SELECT kind FROM agent_events WHERE session_id = ? AND kind IN ('paused', 'grant') "
            "ORDER BY id DESC LIMIT 1",
            [session_id],
        ).fetchone()
        return bool(found and found[0] == "paused")

    def open_agent_session(self, problem: str) -> dict[str, Any] | None:
        """The problem's newest agent session that has not ended."""
        return self.first_row(
            "SELECT * FROM agent_sessions WHERE problem = ? AND ended IS NULL ORDER BY id DESC LIMIT 1", [problem]
        )

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

    def count_agent_version(self, session_id: int) -> None:
        """One more version written in this session, counted in SQL: an MCP server may write into it too."""
        self.conn.execute("UPDATE agent_sessions SET versions = versions + 1 WHERE id = ?", [session_id])

    def session_figures(self, session: dict[str, Any]) -> dict[str, Any]:
        """What an agent's session took: minutes, versions written while it ran, the first that passed and after
        how long, and the median seconds from a new file to its first verdict."""
        started, ended = session.get("started"), session.get("ended")
        rows = self.rows(
            """
            SELECT v.name, v.created AS written, e.status, e.finished
            FROM versions v JOIN evaluations e ON e.id = (
                SELECT MIN(id) FROM evaluations WHERE version_id = v.id
                  AND json_extract(options, '$.kind') IS NOT 'profile' AND status NOT IN ('queued', 'running'))
            WHERE v.problem = ? AND v.created >= ? AND v.created <= ?
            ORDER BY v.created
            """,
            [session.get("problem"), started or "", ended or "9999"],
        )
        waits = [s for r in rows if (s := seconds_between(r["written"], r["finished"])) is not None]
        first = next((r for r in rows if r["status"] == "pass"), None)
        return {
            "minutes": (seconds_between(started, ended or now()) or 0.0) / 60,
            "judged": len(rows),
            "first_pass": first["name"] if first else None,
            "first_pass_minutes": (seconds_between(started, first["finished"]) or 0.0) / 60 if first else None,
            "verdict_median_s": statistics.median(waits) if waits else None,
        }

    def agent_session(self, session_id: int) -> dict[str, Any] | None:
        return self.first_row("SELECT * FROM agent_sessions WHERE id = ?", [session_id])

    def feedback_waiting(self, problem: str, after_verdict: int) -> bool:
        """Guidance not yet delivered, or a verdict after this one: what an agent has yet to hear."""
        found = self.conn.execute(
            "SELECT EXISTS(SELECT 1 FROM guidance WHERE problem = ? AND delivered IS NULL) "
            "OR EXISTS(SELECT 1 FROM verdicts WHERE problem = ? AND id > ?)",
            [problem, problem, after_verdict],
        ).fetchone()
        return bool(found[0])

    def mark_guidance_delivered(self, guidance_id: int, where: str) -> None:
        self.conn.execute("UPDATE guidance SET delivered = ? WHERE id = ?", [f"{now()} {where}", guidance_id])


def granted_text(grant: dict[str, Any]) -> str:
    """'10 more versions and $5.00 more' from a grant's data."""
    parts = []
    if grant.get("versions"):
        parts.append(f"{grant['versions']} more version{'s' * (grant['versions'] != 1)}")
    if grant.get("cost_usd"):
        parts.append(f"${grant['cost_usd']:.2f} more")
    return " and ".join(parts) or "nothing more"


def seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        first, last = datetime.fromisoformat(start), datetime.fromisoformat(end)
    except ValueError:
        return None
    first, last = (t if t.tzinfo else t.replace(tzinfo=UTC) for t in (first, last))
    return max(0.0, (last - first).total_seconds())
