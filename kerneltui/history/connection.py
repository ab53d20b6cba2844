"""The history's SQLite connection: opening (a corrupt file moved aside, never deleted), locking between the
dashboard's threads, transactions and plain queries."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from kerneltui.history.schema import HistoryUnavailable, migrate, refuse_newer

if TYPE_CHECKING:
    import sqlite_utils


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


Opened = TypeVar("Opened", bound="Connection")


@dataclass
class OpenedStore(Generic[Opened]):
    store: Opened
    warning: str | None = None


class Connection:
    def __init__(self, path: Path, create: bool = True) -> None:
        self.path = path
        make_folder_for(path)
        # a reader never creates the file: one opened on a history deleted under it left an empty file behind,
        # which the next dashboard took for a history and could not read
        target, uri = (str(path), False) if create else (f"{path.resolve().as_uri()}?mode=rw", True)
        self.conn = sqlite3.connect(target, timeout=30, check_same_thread=False, isolation_level=None, uri=uri)
        # Held by a thread over a run of queries: closing a connection another thread is reading
        # crashes the process (SIGSEGV), so close() waits for the holder.
        self.lock = threading.RLock()
        self.closed = False
        self.conn.execute("PRAGMA busy_timeout = 30000")
        self._db: sqlite_utils.Database | None = None
        try:
            if create:
                self.conn.execute("PRAGMA journal_mode = WAL")
                migrate(self)
            else:  # readers open an existing history and write nothing
                refuse_newer(self)
        except BaseException:
            self.conn.close()
            raise

    @property
    def db(self) -> sqlite_utils.Database:
        """sqlite-utils over the same connection, imported on first use: readers never need it."""
        if self._db is None:
            import sqlite_utils

            self._db = sqlite_utils.Database(self.conn)
        return self._db

    @classmethod
    def open(cls, path: Path, check: bool = True) -> OpenedStore[Self]:
        """Opens (or creates) the history; a corrupt file is moved aside and a new one started. A newer
        kerneltui's history raises HistoryTooNew and is left where it is.

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

    @classmethod
    def refuse_unusable(cls, path: Path) -> None:
        """HistoryUnavailable when the history at `path` cannot be used (HistoryTooNew: a newer kerneltui's), said
        before a dashboard starts, not as an empty one. Nothing is created; a file that cannot be read is left to
        open() to move aside."""
        refuse_non_folder(path)
        if path.is_file():
            try:
                cls(path, create=False).close()
            except sqlite3.DatabaseError:
                pass

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
    def held(self) -> Iterator[Self | None]:
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

    def data_version(self) -> int:
        """Changes whenever another connection commits: a cheap way to notice the CLI's writes."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def rows(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        cursor = self.conn.execute(sql, params or [])
        columns = [c[0] for c in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

    def first_row(self, sql: str, params: list[Any] | None = None) -> dict[str, Any] | None:
        """The query's first row, or None when it has none."""
        found = self.rows(sql, params)
        return found[0] if found else None

    def count(self, table: str) -> int:
        return int(self.conn.execute(f"SELECT COUNT(*) FROM [{table}]").fetchone()[0])


def make_folder_for(path: Path) -> None:
    """The history's folder, made if missing; HistoryUnavailable saying why it cannot be (a file in its place, a
    read-only disk), not a traceback."""
    refuse_non_folder(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HistoryUnavailable(f"the history cannot be kept in {path.parent}: {exc.strerror or exc}") from None


def refuse_non_folder(path: Path) -> None:
    """HistoryUnavailable when something other than a folder stands where the history's folder goes."""
    if path.parent.exists() and not path.parent.is_dir():
        raise HistoryUnavailable(f"the history cannot be kept in {path.parent}: it is not a folder")
