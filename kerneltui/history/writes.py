"""Writing problems, versions, their files' stamps, verdicts and guidance."""

from __future__ import annotations

from pathlib import Path

from kerneltui.history.connection import Connection, now


class Writes(Connection):
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

    def add_rewind(self, problem: str, version_id: int, version: str, who: str) -> int:
        row = {"problem": problem, "version_id": version_id, "version": version, "who": who, "created": now()}
        return int(self.table("rewinds").insert(row).last_pk or 0)

    def add_guidance(self, problem: str, text: str, who: str) -> int:
        return int(
            self.table("guidance")
            .insert({"problem": problem, "text": text, "who": who, "created": now(), "delivered": None})
            .last_pk
            or 0
        )
