"""A problem's digests: the accepted one (problems.problem_hash, what evaluations are judged against) and one seen on
disk awaiting the person's acceptance (problems.pending_hash)."""

from __future__ import annotations

from kerneltui.history.connection import Connection


class ProblemDigests(Connection):
    def problem_digests(self, name: str) -> tuple[str | None, str | None]:
        """(accepted, pending) digests of a problem; (None, None) for a problem never seen."""
        row = self.conn.execute("SELECT problem_hash, pending_hash FROM problems WHERE name = ?", [name]).fetchone()
        return (row[0] or None, row[1] or None) if row else (None, None)

    def accept_problem(self, name: str, digest: str) -> int:
        """The problem judged against `digest` from now on; how many evaluations were judged against another."""
        self.conn.execute("UPDATE problems SET problem_hash = ?, pending_hash = NULL WHERE name = ?", [digest, name])
        found = self.conn.execute(
            "SELECT COUNT(*) FROM evaluations WHERE problem = ? AND COALESCE(problem_hash, '') NOT IN ('', ?)",
            [name, digest],
        ).fetchone()
        return int(found[0])

    def set_pending_problem(self, name: str, digest: str | None) -> None:
        self.conn.execute("UPDATE problems SET pending_hash = ? WHERE name = ?", [digest, name])

    def adopt_problem_digest(self, name: str, old: str, new: str) -> None:
        """Evaluations recorded against `old` (the same files, an earlier kind of digest) recorded against `new`."""
        self.conn.execute(
            "UPDATE evaluations SET problem_hash = ? WHERE problem = ? AND problem_hash = ?", [new, name, old]
        )

    def set_judged_against(self, evaluation_id: int, digest: str) -> None:
        """The accepted problem digest an evaluation is judged against."""
        self.conn.execute("UPDATE evaluations SET problem_hash = ? WHERE id = ?", [digest, evaluation_id])
