"""The history's numbered migrations: an older kerneltui's history brought up to date once, in order, and
recorded; a newer kerneltui's refused and left as it is."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kerneltui import cli
from kerneltui.history import schema
from kerneltui.history.store import SCHEMA_VERSION, HistoryTooNew, Store
from kerneltui.ui.app import KernelTUI

# The history as the first kerneltui wrote it (schema version 1), in plain SQL: no code of ours builds it.
FIRST_LAYOUT = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE problems (name TEXT PRIMARY KEY, path TEXT, description TEXT, problem_hash TEXT, created TEXT);
CREATE TABLE versions (id INTEGER PRIMARY KEY, problem TEXT, name TEXT, number INTEGER, path TEXT, hash TEXT,
    size INTEGER, notes TEXT, author TEXT, created TEXT, deleted TEXT);
CREATE UNIQUE INDEX idx_versions_problem_name_hash ON versions (problem, name, hash);
CREATE TABLE evaluations (id INTEGER PRIMARY KEY, version_id INTEGER, problem TEXT, version TEXT, hash TEXT,
    status TEXT, ok INTEGER, failed_rung TEXT, error TEXT, device_kind TEXT, device_name TEXT, arch TEXT,
    sandbox TEXT, problem_hash TEXT, seeds TEXT, options TEXT, device TEXT, queued TEXT, started TEXT,
    finished TEXT, seconds FLOAT, max_abs FLOAT, max_rel FLOAT, rmse FLOAT, psnr FLOAT, cosine FLOAT,
    median_us FLOAT, ref_median_us FLOAT, speedup FLOAT, vs_best FLOAT, roofline_pct FLOAT);
CREATE INDEX idx_evaluations_problem_id ON evaluations (problem, id);
CREATE INDEX idx_evaluations_version_id ON evaluations (version_id);
CREATE TABLE rungs (id INTEGER PRIMARY KEY, evaluation_id INTEGER, idx INTEGER, name TEXT, ok INTEGER,
    skipped TEXT, err TEXT, seconds FLOAT, metrics TEXT, log TEXT);
CREATE INDEX idx_rungs_evaluation_id ON rungs (evaluation_id);
CREATE TABLE case_results (id INTEGER PRIMARY KEY, evaluation_id INTEGER, case_label TEXT, seed INTEGER,
    ok INTEGER, err TEXT, max_abs FLOAT, max_rel FLOAT, mse FLOAT, rmse FLOAT, psnr FLOAT, cosine FLOAT);
CREATE INDEX idx_case_results_evaluation_id ON case_results (evaluation_id);
CREATE TABLE timings (id INTEGER PRIMARY KEY, evaluation_id INTEGER, case_label TEXT, median_us FLOAT,
    p20_us FLOAT, p80_us FLOAT, min_us FLOAT, n INTEGER, noise_pct FLOAT, ref_median_us FLOAT, speedup FLOAT,
    gbps FLOAT, tflops FLOAT, roofline_pct FLOAT, device_name TEXT);
CREATE INDEX idx_timings_evaluation_id ON timings (evaluation_id);
CREATE TABLE artifacts (id INTEGER PRIMARY KEY, evaluation_id INTEGER, kernel TEXT, dsl TEXT, kind TEXT,
    path TEXT, bytes INTEGER, case_label TEXT);
CREATE INDEX idx_artifacts_evaluation_id ON artifacts (evaluation_id);
CREATE TABLE verdicts (id INTEGER PRIMARY KEY, version_id INTEGER, problem TEXT, version TEXT, hash TEXT,
    verdict TEXT, reason TEXT, who TEXT, created TEXT);
CREATE INDEX idx_verdicts_version_id ON verdicts (version_id);
CREATE TABLE guidance (id INTEGER PRIMARY KEY, problem TEXT, text TEXT, who TEXT, created TEXT, delivered TEXT);
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO problems VALUES ('softmax', '/ws/softmax', 'row softmax', 'p1', '2026-12-01T10:00:00');
INSERT INTO versions VALUES (1, 'softmax', 'v001', 1, '/ws/softmax/v001.py', 'h1', 120, 'first', 'agent',
    '2026-12-01T10:01:00', NULL);
INSERT INTO evaluations (id, version_id, problem, version, hash, status, ok, device_name, problem_hash, options,
    queued, finished, median_us, speedup)
    VALUES (1, 1, 'softmax', 'v001', 'h1', 'pass', 1, 'H100', 'p1', '{}', '2026-12-01T10:01:01',
    '2026-12-01T10:01:09', 12.5, 1.8);
INSERT INTO rungs VALUES (1, 1, 0, 'load', 1, NULL, NULL, 0.1, '{}', '');
INSERT INTO verdicts VALUES (1, 1, 'softmax', 'v001', 'h1', 'approved', NULL, 'me', '2026-12-01T10:02:00');
"""


def first_kerneltui_history(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.executescript(FIRST_LAYOUT)
    conn.close()
    return path


def layout(path: Path) -> dict[str, Any]:
    """Every table's columns and every index, as SQLite has them (column names: a float column's type is
    FLOAT or REAL as the sqlite-utils of the day wrote it, the same to SQLite)."""
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        columns = {t: sorted(r[1] for r in conn.execute(f"PRAGMA table_info([{t}])")) for t in tables}
        indexes = conn.execute("SELECT tbl_name, name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        found = {"columns": columns, "indexes": sorted(indexes.fetchall())}
    conn.close()
    return found


def applied(path: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT number, applied FROM schema_migrations ORDER BY number").fetchall()
    conn.close()
    return rows


def new_history(tmp_path: Path) -> Path:
    """A history this kerneltui started, for its layout."""
    fresh = tmp_path / "new" / "history.db"
    Store.open(fresh).store.close()
    return fresh


def counted_migrations(calls: list[int]) -> tuple[tuple[int, Callable[[schema.Tables], None]], ...]:
    """The migrations, each noting its number in `calls` as it runs."""

    def counted(number: int, step: Callable[[schema.Tables], None]) -> Callable[[schema.Tables], None]:
        def run(store: schema.Tables) -> None:
            calls.append(number)
            step(store)

        return run

    return tuple((number, counted(number, step)) for number, step in schema.MIGRATIONS)


def stored_version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    conn.close()
    return int(row[0])


def test_the_first_kerneltuis_history_is_upgraded_and_read(tmp_path: Path) -> None:
    path = first_kerneltui_history(tmp_path / "old" / "history.db")
    opened = Store.open(path)
    store = opened.store
    try:
        assert opened.warning is None  # upgraded, not moved aside
        row = store.version_rows("softmax")[0]  # reads evaluations.race and .flags, problems' hashes
        assert (row["name"], row["status"], row["median_us"], row["verdict"]) == ("v001", "pass", 12.5, "approved")
        assert (row["race"], row["flags"], row["stale"]) == (None, None, 0)
        assert [e["version"] for e in store.history("softmax")] == ["v001"]  # reads pruned_dumps
        assert store.problem_rows()[0]["best_us"] == 12.5
        session = store.start_agent_session("softmax", "replay", "m", 1)  # the tables version 2 brought
        store.update_agent_session(session, input_tokens=10)  # a column version 4 brought
        assert store.agent_session(session)["input_tokens"] == 10  # type: ignore[index]
    finally:
        store.close()
    assert layout(path) == layout(new_history(tmp_path))
    assert [number for number, _ in applied(path)] == [2, 3, 4, 5, 6]  # 1 it had
    assert stored_version(path) == SCHEMA_VERSION


def test_a_new_history_has_every_migration_recorded(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    Store.open(path).store.close()
    assert [number for number, _ in applied(path)] == [number for number, _ in schema.MIGRATIONS]
    assert stored_version(path) == SCHEMA_VERSION == schema.MIGRATIONS[-1][0]


def test_reopening_applies_nothing_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = first_kerneltui_history(tmp_path / "history.db")
    Store.open(path).store.close()
    first = applied(path)
    calls: list[int] = []
    monkeypatch.setattr(schema, "MIGRATIONS", counted_migrations(calls))
    with sqlite3.connect(path) as watcher:
        before = watcher.execute("PRAGMA data_version").fetchone()[0]
        for _ in range(3):
            Store.open(path).store.close()
            Store(path, create=False).close()
        after = watcher.execute("PRAGMA data_version").fetchone()[0]
    watcher.close()
    assert calls == [] and before == after  # nothing run, nothing written
    assert applied(path) == first


def test_a_migration_is_applied_once_each_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = first_kerneltui_history(tmp_path / "history.db")
    calls: list[int] = []
    monkeypatch.setattr(schema, "MIGRATIONS", counted_migrations(calls))
    Store.open(path).store.close()
    Store.open(path).store.close()
    assert calls == [2, 3, 4, 5, 6]


def test_a_failed_migration_leaves_the_history_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = first_kerneltui_history(tmp_path / "history.db")
    before = layout(path)

    def broken(store: schema.Tables) -> None:
        raise RuntimeError("migration 4 failed")

    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS[:3], (4, broken), *schema.MIGRATIONS[4:]))
    with pytest.raises(RuntimeError, match="migration 4 failed"):
        Store(path)
    assert layout(path) == before and stored_version(path) == 1  # 2 and 3 undone with it: one transaction


def test_changes_that_came_without_a_version_of_their_own_are_added(tmp_path: Path) -> None:
    """problems.pending_hash and pruned_dumps arrived while the version stayed 4: a version-4 history may lack
    them, and gains them."""
    path = tmp_path / "history.db"
    Store.open(path).store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE pruned_dumps")
        conn.execute("ALTER TABLE problems DROP COLUMN pending_hash")
        conn.execute("DROP TABLE schema_migrations")  # as a version-4 kerneltui left it
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    conn.close()
    Store.open(path).store.close()
    assert layout(path) == layout(new_history(tmp_path))
    assert [number for number, _ in applied(path)] == [5, 6]


def test_a_newer_kerneltuis_history_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    Store.open(path).store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
        conn.execute("CREATE TABLE from_the_future (x TEXT)")
    conn.close()
    before = layout(path)
    for opening in (lambda: Store.open(path), lambda: Store(path, create=False), lambda: Store.refuse_unusable(path)):
        with pytest.raises(HistoryTooNew, match=f"newer kerneltui .*version {SCHEMA_VERSION + 1}.*upgrade kerneltui"):
            opening()
    assert list(tmp_path.glob("history.db.corrupt-*")) == []  # not mistaken for a corrupt file
    assert layout(path) == before and stored_version(path) == SCHEMA_VERSION + 1


def test_the_cli_says_a_newer_history_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # main() wraps them; put back after the test
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    workspace = tmp_path / "ws"
    (workspace / "softmax").mkdir(parents=True)
    path = workspace / ".kerneltui" / "history.db"
    Store.open(path).store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    conn.close()
    monkeypatch.setattr(KernelTUI, "run", lambda self: pytest.fail("the dashboard started"))
    for argv in (["history", "--workspace", str(workspace)], ["dashboard", str(workspace), "--no-judge"]):
        assert cli.main(argv) == cli.EXIT_USAGE
        assert "was written by a newer kerneltui (history version 999" in capsys.readouterr().err


def test_a_state_folder_that_is_a_file_is_said_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file named .kerneltui where the workspace keeps its state: `kerneltui history` ended in FileExistsError's
    traceback, and the dashboard started and stayed at "judge starting…" behind a toast."""
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    workspace = tmp_path / "ws"
    (workspace / "softmax").mkdir(parents=True)
    (workspace / ".kerneltui").write_text("not a folder")
    monkeypatch.setattr(KernelTUI, "run", lambda self: pytest.fail("the dashboard started"))
    for argv in (["history", "--workspace", str(workspace)], ["dashboard", str(workspace), "--no-judge"]):
        assert cli.main(argv) == cli.EXIT_USAGE
        err = capsys.readouterr().err
        assert f"the history cannot be kept in {workspace / '.kerneltui'}" in err and "Traceback" not in err, err
    assert (workspace / ".kerneltui").read_text() == "not a folder"


def test_a_corrupt_history_is_still_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    path.write_bytes(b"this is not a database" * 100)
    opened = Store.open(path)
    opened.store.close()
    assert opened.warning and "could not be read" in opened.warning
    assert len(list(tmp_path.glob("history.db.corrupt-*"))) == 1
    assert stored_version(path) == SCHEMA_VERSION
