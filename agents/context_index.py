"""A full-text index over the context folder and the installed DSL packages, in SQLite FTS5.

Files are cut into chunks by definition where that is cheap (Python: def/class blocks; Markdown: sections
under a heading), else into overlapping windows of lines; each chunk keeps its path and line range, so a hit
reads as `path:start-end`. Re-indexing is incremental: a file is chunked again only when its size or mtime
changed. The index file lives wherever the caller says (the context folder may be read-only).

Installed packages (triton, cutlass, tilelang) are indexed in place, read only, under `site/<package>/...`: a
new index holds every one installed, later refreshes keep the ones it holds unless told otherwise.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import re
import sqlite3
import stat
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = 1
MAX_BYTES = 2_000_000
SNIFF_BYTES = 8192
WINDOW, OVERLAP = 60, 10  # lines per window, and how many the next one repeats
MAX_BLOCK = 150  # a definition longer than this is cut into windows too
PACKAGES = ("triton", "cutlass", "tilelang")
NEW_INDEX_PACKAGES = PACKAGES  # what a new index holds unless told otherwise
INDEX_FILE = "context-index.sqlite"
SITE = "site"  # the virtual folder installed packages appear under
SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "venv", ".kerneltui", ".mypy_cache", ".pytest_cache"}
SKIP_DIRS |= {".ruff_cache", ".tox", "build", "dist", "_build", "CMakeFiles", ".ipynb_checkpoints"}
BINARY_SUFFIXES = {".pyc", ".so", ".a", ".o", ".bc", ".cubin", ".fatbin", ".png", ".jpg", ".jpeg", ".gif", ".pdf"}
BINARY_SUFFIXES |= {".zip", ".gz", ".tar", ".whl", ".pt", ".bin", ".npy", ".sqlite", ".db", ".ico", ".woff"}
# '_' joins identifiers (make_tiled_copy is one token); '.' splits, and a quoted query term is a phrase, so
# "tl.dot" finds tl.dot and "make_tiled_copy" finds cute.make_tiled_copy.
TOKENIZER = "unicode61 tokenchars '_'"
# bm25 weights by column: path, name (the definition's), body, parts (identifiers split into words)
WEIGHTS = (2.0, 5.0, 1.0, 0.3)
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
WORD_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
HEADING = re.compile(r"^#{1,6}\s+(.*)")
FENCE = re.compile(r"^\s*(```|~~~)")


class IndexUnavailable(Exception):
    """This Python's SQLite has no FTS5, so there is no index: callers fall back to a plain word match."""


def check_fts5() -> None:
    """IndexUnavailable, saying why, when this SQLite lacks FTS5."""
    try:
        with closing(sqlite3.connect(":memory:")) as conn:
            conn.execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
    except sqlite3.OperationalError as exc:
        raise IndexUnavailable(f"SQLite {sqlite3.sqlite_version} here has no FTS5 ({exc})") from None


def index_file(state: Path | None, context: Path) -> Path:
    """`<state>/context-index.sqlite` when that folder can be written (kerneltui's state folder: the CLI and
    the agents share the file), else a per-user cache file."""
    if state is not None and state.is_dir() and os.access(state, os.W_OK):
        return state / INDEX_FILE
    return default_index_path(context)


def default_index_path(context: Path) -> Path:
    """A per-user cache file for a context folder, for callers with no state folder of their own."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kerneltui"
    digest = hashlib.sha1(str(context.resolve()).encode()).hexdigest()[:12]
    return cache / f"context-index-{digest}.sqlite"


# --- chunking ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    start: int  # 1-based, inclusive
    end: int
    name: str  # the definition or heading, '' for a plain window


def windows(start: int, end: int, name: str = "") -> list[Chunk]:
    """Lines start..end as overlapping windows."""
    out, at = [], start
    while at <= end:
        stop = min(end, at + WINDOW - 1)
        out.append(Chunk(at, stop, name))
        if stop == end:
            break
        at = stop + 1 - OVERLAP
    return out


def block(start: int, end: int, name: str) -> list[Chunk]:
    return [Chunk(start, end, name)] if end - start < MAX_BLOCK else windows(start, end, name)


def python_chunks(text: str, total: int) -> list[Chunk]:
    """Each def and class a chunk (a long class: its header, then its members), and the code between them
    in windows."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return windows(1, total)
    out: list[Chunk] = []
    covered: set[int] = set()

    def visit(nodes: list[ast.stmt], prefix: str) -> None:
        for node in nodes:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            end = node.end_lineno or node.lineno
            name = f"{prefix}{node.name}"
            covered.update(range(start, end + 1))
            members = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
            if isinstance(node, ast.ClassDef) and end - start >= MAX_BLOCK and members:
                out.extend(block(start, members[0].lineno - 1, name))
                visit(node.body, f"{name}.")
            else:
                out.extend(block(start, end, name))

    visit(tree.body, "")
    return out + gaps(text.splitlines(), covered)


def gaps(lines: list[str], covered: set[int]) -> list[Chunk]:
    """Windows over the runs of lines no definition holds (module docstrings, constants, calls)."""
    out: list[Chunk] = []
    run: list[int] = []
    for number in range(1, len(lines) + 2):
        if number <= len(lines) and number not in covered:
            run.append(number)
            continue
        filled = [i for i in run if lines[i - 1].strip()]
        if filled:  # without the blank lines around the run
            out.extend(windows(filled[0], filled[-1]))
        run = []
    return out


def markdown_chunks(lines: list[str]) -> list[Chunk]:
    """A section per heading (headings inside code fences are code)."""
    starts: list[tuple[int, str]] = [(1, "")]
    fenced = False
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (heading := HEADING.match(line)):
            starts.append((number, heading.group(1).strip()))
    out: list[Chunk] = []
    for i, (start, name) in enumerate(starts):
        end = starts[i + 1][0] - 1 if i + 1 < len(starts) else len(lines)
        if end >= start and any(line.strip() for line in lines[start - 1 : end]):
            out.extend(block(start, end, name))
    return out


def chunk_text(path: str, text: str) -> list[Chunk]:
    lines = text.splitlines()
    if not lines:
        return []
    suffix = Path(path).suffix.lower()
    if suffix in (".py", ".pyi"):
        return python_chunks(text, len(lines))
    if suffix in (".md", ".markdown"):
        return markdown_chunks(lines)
    return windows(1, len(lines))


def word_parts(text: str) -> str:
    """The words inside compound identifiers (TiledMma: tiled mma; make_tiled_copy: make tiled copy)."""
    parts: set[str] = set()
    for ident in set(IDENT.findall(text)):
        pieces = [p.lower() for seg in ident.split("_") for p in WORD_PART.findall(seg)]
        if len(pieces) > 1:
            parts.update(pieces)
    return " ".join(sorted(parts))


# --- queries ----------------------------------------------------------------------------------------


def query_terms(query: str) -> list[str]:
    """The query's words and dotted or hyphenated names (tl.dot, cp.async.bulk, 16-byte), nothing else."""
    return re.findall(r"\w+(?:[.\-]\w+)*", str(query))[:32]


def fts_query(terms: list[str], joiner: str) -> str:
    """Each term a quoted FTS5 phrase (the tokenizer splits it as it split the text), so no user query is
    FTS syntax: NEAR, AND, *, ( and quotes are plain text."""
    return f" {joiner} ".join('"' + t.replace('"', '""') + '"' for t in terms)


def term_words(term: str) -> list[str]:
    return [w.lower() for w in re.findall(r"\w+", term)]


def holds(term: str, text: str) -> bool:
    """Whether a chunk's lowercased text holds the term's words (in order, as a phrase would)."""
    words = term_words(term)  # whole tokens, as the tokenizer cut them: wgmma is not in wgmma_fence
    pattern = r"(?<!\w)" + r"[^\w]+".join(map(re.escape, words)) + r"(?!\w)"
    return bool(words) and re.search(pattern, text) is not None


# How kernels import the DSLs: `tl.dot` is defined under triton/language, `T.gemm` under tilelang/language.
ALIASES = {"tl": "site/triton/language/", "t": "site/tilelang/language/", "cute": "site/cutlass/cute/"}


def defines(name: str, path: str, terms: list[str]) -> set[str]:
    """The terms this chunk defines: its name is the term's last word (`gemm` or `Gemm.gemm` for T.gemm), in the
    package the term's alias names, if it names one."""
    defined = name.lower().rsplit(".", 1)[-1]
    found = set()
    for term in terms:
        words = term_words(term)
        alias = ALIASES.get(words[0]) if len(words) > 1 else None
        if words and words[-1] == defined and (alias is None or path.startswith(alias)):
            found.add(term)
    return found


@dataclass(frozen=True)
class Hit:
    path: str
    start: int
    end: int
    name: str
    matched: int  # how many of the query's terms the chunk holds
    score: float  # bm25: lower is better
    lines: list[tuple[int, str]]  # the chunk's lines holding a term

    @property
    def where(self) -> str:
        return f"{self.path}:{self.start}-{self.end}"

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "start": self.start,
            "end": self.end,
            "name": self.name,
            "matched": self.matched,
            "score": round(self.score, 4),
            "lines": [{"line": n, "text": t} for n, t in self.lines],
        }


def matching_lines(body: str, start: int, terms: list[str], limit: int = 3) -> list[tuple[int, str]]:
    found = []
    for offset, line in enumerate(body.splitlines()):
        lowered = line.lower()
        if any(holds(t, lowered) for t in terms):
            found.append((start + offset, line.strip()[:200]))
            if len(found) >= limit:
                break
    return found


# --- the index --------------------------------------------------------------------------------------


@dataclass
class IndexStats:
    files: int = 0  # files holding chunks
    chunks: int = 0
    rechunked: int = 0  # files chunked in this refresh
    removed: int = 0  # files gone since the last refresh
    skipped: Counter[str] = field(default_factory=Counter)  # reason: files
    seconds: float = 0.0

    def summary(self) -> str:
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()) if n) or "none"
        return (
            f"{self.files} files indexed ({self.rechunked} chunked now, {self.removed} removed), {self.chunks} chunks, "
            f"skipped: {skipped}; {self.seconds:.2f} s"
        )


@dataclass(frozen=True)
class Source:
    prefix: str  # '' for the context folder, 'site/triton/' for a package
    root: Path


def package_roots(names: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Installed packages' source folders, found without importing them."""
    found = {}
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec and spec.submodule_search_locations:
            found[name] = Path(next(iter(spec.submodule_search_locations)))
    return found


def walk(source: Source, skipped: Counter[str]) -> Iterator[tuple[str, Path, os.stat_result]]:
    """(indexed path, real path, stat) of each regular file under a source, skipping tool and build folders."""
    top = Path(os.path.realpath(source.root))
    for folder, dirs, files in os.walk(source.root, followlinks=False):
        kept = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        skipped["folders skipped"] += len(dirs) - len(kept)
        dirs[:] = sorted(kept)
        for name in sorted(files):
            real = Path(folder) / name
            try:
                info = real.stat()
            except OSError:
                skipped["unreadable"] += 1
                continue
            if not stat.S_ISREG(info.st_mode):
                skipped["not a file"] += 1
            elif real.is_symlink() and top not in Path(os.path.realpath(real)).parents:
                skipped["links outside"] += 1  # a search must not show what read_file may not read
            else:
                yield source.prefix + real.relative_to(source.root).as_posix(), real, info


def read_text(real: Path, size: int) -> tuple[str | None, str]:
    """(text, '') or (None, why it is not indexed)."""
    if size > MAX_BYTES:
        return None, "too large"
    if real.suffix.lower() in BINARY_SUFFIXES:
        return None, "binary"
    try:
        data = real.read_bytes()
    except OSError:
        return None, "unreadable"
    if b"\x00" in data[:SNIFF_BYTES]:
        return None, "binary"
    return data.decode(errors="replace"), ""


class ContextIndex:
    """The index file at `db_path` over `context` (and installed packages when `packages`).

    Every method opens its own connection, so one object serves several threads and processes; a refresh
    holds SQLite's write lock from the comparison to the commit, so two never chunk the same file twice."""

    def __init__(self, db_path: Path, context: Path | None, packages: bool | tuple[str, ...] | None = None) -> None:
        check_fts5()
        self.db_path, self.context = Path(db_path), context.resolve() if context else None
        self.packages = packages  # True: all of PACKAGES installed; a tuple: those; None: as last built (new: all)

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.db_path, timeout=60, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            self.ensure_schema(conn)
            yield conn
        finally:
            conn.close()

    def ensure_schema(self, conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row and row[0] != str(SCHEMA):
            conn.execute("DROP TABLE IF EXISTS files")
            conn.execute("DROP TABLE IF EXISTS chunks")
            conn.execute("DELETE FROM meta")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS files(path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, "
            "first_row INTEGER, rows INTEGER, skip TEXT)"
        )
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS chunks USING fts5(path, name, body, parts, start UNINDEXED, "
            f'stop UNINDEXED, tokenize="{TOKENIZER}")'
        )
        conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA),))

    # --- building --------------------------------------------------------------------------------

    def meta(self, conn: sqlite3.Connection, key: str) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else None

    def set_meta(self, conn: sqlite3.Connection, key: str, value: str) -> None:
        conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def sources(self, conn: sqlite3.Connection) -> list[Source]:
        """The context folder, and the packages asked for now (else those the index already holds)."""
        out = [Source("", self.context)] if self.context else []
        if self.packages is None:  # as last built; a new index holds every installed package
            held = self.meta(conn, "packages")
            names = tuple(json.loads(held)) if held is not None else NEW_INDEX_PACKAGES
        elif isinstance(self.packages, tuple):
            names = tuple(n for n in self.packages if n in PACKAGES)
        else:
            names = PACKAGES if self.packages else ()
        roots = package_roots(names)
        self.set_meta(conn, "packages", json.dumps(sorted(roots)))
        return out + [Source(f"{SITE}/{name}/", root) for name, root in sorted(roots.items())]

    def refresh(self) -> IndexStats:
        """Chunks new and changed files, drops removed ones; fast when nothing changed."""
        began, stats = time.monotonic(), IndexStats()
        with self.connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if self.meta(conn, "context") != str(self.context):  # another folder: start over
                    conn.execute("DELETE FROM files")
                    conn.execute("DELETE FROM chunks")
                    self.set_meta(conn, "context", str(self.context))
                self.sync(conn, self.sources(conn), stats)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            self.count(conn, stats)
        stats.seconds = time.monotonic() - began
        return stats

    def sync(self, conn: sqlite3.Connection, sources: list[Source], stats: IndexStats) -> None:
        known = {row[0]: (row[1], row[2]) for row in conn.execute("SELECT path, size, mtime_ns FROM files")}
        seen: set[str] = set()
        next_row = (conn.execute("SELECT max(rowid) FROM chunks").fetchone()[0] or 0) + 1
        for source in sources:
            for path, real, info in walk(source, stats.skipped):
                if path in seen:
                    continue
                seen.add(path)
                if known.get(path) == (info.st_size, info.st_mtime_ns):
                    continue
                self.drop(conn, path)
                next_row = self.add(conn, path, real, info, next_row)
                stats.rechunked += 1
        for path in set(known) - seen:
            self.drop(conn, path)
            stats.removed += 1

    def drop(self, conn: sqlite3.Connection, path: str) -> None:
        row = conn.execute("SELECT first_row, rows FROM files WHERE path = ?", (path,)).fetchone()
        if row and row[1]:  # a file's chunks are consecutive rows: delete them by range, not by a scan
            conn.execute("DELETE FROM chunks WHERE rowid >= ? AND rowid < ?", (row[0], row[0] + row[1]))
        conn.execute("DELETE FROM files WHERE path = ?", (path,))

    def add(self, conn: sqlite3.Connection, path: str, real: Path, info: os.stat_result, next_row: int) -> int:
        """Chunks one file into rows from next_row on; returns the next free row."""
        text, why = read_text(real, info.st_size)
        chunks = chunk_text(path, text) if text is not None else []
        lines = text.splitlines() if text is not None else []
        rows = [
            (next_row + i, path, c.name, body, word_parts(body), c.start, c.end)
            for i, c in enumerate(chunks)
            for body in ["\n".join(lines[c.start - 1 : c.end])]
        ]
        conn.executemany("INSERT INTO chunks(rowid, path, name, body, parts, start, stop) VALUES (?,?,?,?,?,?,?)", rows)
        conn.execute(
            "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?)",
            (path, info.st_size, info.st_mtime_ns, next_row, len(rows), why or None),
        )
        return next_row + len(rows)

    def count(self, conn: sqlite3.Connection, stats: IndexStats) -> None:
        stats.files = conn.execute("SELECT count(*) FROM files WHERE rows > 0").fetchone()[0]
        stats.chunks = conn.execute("SELECT coalesce(sum(rows), 0) FROM files").fetchone()[0]
        for why, n in conn.execute("SELECT coalesce(skip, 'empty'), count(*) FROM files WHERE rows = 0 GROUP BY 1"):
            stats.skipped[why] += n

    # --- searching -------------------------------------------------------------------------------

    def search(self, query: str, limit: int = 10) -> list[Hit]:
        """Chunks holding every term first, then those holding fewer, by how many; among equals, a chunk that
        defines a term's name (`def gemm` for T.gemm, `class TiledMma`) before one that only mentions it, the
        context folder before installed packages, then by bm25. A definition counts as holding its term:
        T.gemm's definition never says T.gemm."""
        terms = query_terms(query)
        if not terms:
            return []
        names = sorted({term_words(t)[-1] for t in terms if term_words(t)})
        with self.connect() as conn:
            rows = self.matches(conn, f"name : ({fts_query(names, 'OR')})", limit * 50) if names else []
            rows += self.matches(conn, fts_query(terms, "AND"), limit)
            rows += self.matches(conn, fts_query(terms, "AND"), limit, context_only=True)  # not crowded out
            if len(rows) < limit and len(terms) > 1:
                rows += self.matches(conn, fts_query(terms, "OR"), limit * 20)
        hits: dict[int, tuple[bool, Hit]] = {}
        for rowid, path, name, body, parts, start, stop, score in rows:
            if rowid in hits:
                continue
            lowered = f"{path}\n{name}\n{body}\n{parts}".lower()
            defined = defines(str(name), str(path), terms)
            matched = sum(holds(t, lowered) or t in defined for t in terms)
            hit = Hit(path, int(start), int(stop), name, matched, score, matching_lines(body, int(start), terms))
            hits[rowid] = (bool(defined), hit)
        # among equals the context folder (notes and checkouts chosen for agents) before installed packages
        ranked = sorted(
            hits.values(), key=lambda dh: (-dh[1].matched, not dh[0], dh[1].path.startswith(f"{SITE}/"), dh[1].score)
        )
        return [hit for _, hit in ranked[:limit]]

    def matches(
        self, conn: sqlite3.Connection, match: str, limit: int, context_only: bool = False
    ) -> list[tuple[Any, ...]]:
        """The best `limit` chunks by bm25 (`context_only`: outside the installed packages' site/)."""
        weights = ", ".join(map(str, WEIGHTS))
        where = f"chunks MATCH ? AND path NOT LIKE '{SITE}/%'" if context_only else "chunks MATCH ?"
        try:
            return conn.execute(
                f"SELECT rowid, path, name, body, parts, start, stop, bm25(chunks, {weights}) AS score FROM chunks "
                f"WHERE {where} ORDER BY score LIMIT ?",
                (match, limit),
            ).fetchall()
        except sqlite3.OperationalError:  # quoting makes this unreachable; a query is never worth a crash
            return []

    def package_file(self, path: str) -> Path | None:
        """The real file behind an indexed `site/<package>/...` path, or None: only files this index holds,
        inside the package's folder as installed now."""
        parts = path.split("/", 2)
        if len(parts) < 3 or parts[0] != SITE or parts[1] not in PACKAGES or not self.db_path.is_file():
            return None
        with self.connect() as conn:
            row = conn.execute("SELECT rows FROM files WHERE path = ?", (path,)).fetchone()
        root = package_roots((parts[1],)).get(parts[1])
        if not row or not row[0] or root is None:
            return None
        real, top = Path(os.path.realpath(root / parts[2])), Path(os.path.realpath(root))
        return real if top in real.parents and real.is_file() else None


def format_hits(hits: list[Hit], query: str) -> str:
    """Hits as `path:start-end  name  (k of n words)`, each with its matching lines as `path:line: text`."""
    if not hits:
        return f"nothing in the context matches {query}"
    total = len(query_terms(query))
    out = []
    for hit in hits:
        name = f"  {hit.name}" if hit.name else ""
        out.append(f"{hit.where}{name}  ({hit.matched} of {total} words)")
        out.extend(f"  {hit.path}:{n}: {text}" for n, text in hit.lines)
    return "\n".join(out)
