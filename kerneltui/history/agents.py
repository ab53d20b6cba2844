"""Agent sessions and their events, and what reaches an agent: guidance and verdicts not yet seen."""

from __future__ import annotations

import json
import sqlite3
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
