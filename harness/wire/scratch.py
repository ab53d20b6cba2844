"""Reading what a kernel's worker left in its scratch folder, as data from a hostile writer.

The worker could have planted anything there: symlinks to the judge's /proc/self/environ or to the
person's files, hard links, FIFOs that block an open, files that grow while read, directories swapped
for links mid-walk. So every path is walked one component at a time from a descriptor of the scratch
folder with O_NOFOLLOW, only regular files with a single link are read, and no more than a cap.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")
MAX_NAME = 96


class Untrusted(Exception):
    """A file in the scratch folder that the judge will not read (a link, not a regular file, too big...)."""


class Missing(Untrusted):
    """A file that is not there: nothing was refused."""


MAX_JSON_DEPTH = 32
_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def safe_name(text: object, fallback: str = "kernel") -> str:
    """A name the judge can use for a file of its own: letters, digits, '_', '.', '-'; no leading dot."""
    name = _UNSAFE_NAME.sub("_", str(text))[:MAX_NAME].lstrip(".")
    return name or fallback


@contextlib.contextmanager
def _dir_fd(root: Path, parts: tuple[str, ...]) -> Iterator[int]:
    """A descriptor of root/parts, each component opened without following links."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            if part in ("", ".", "..") or "/" in part:
                raise Untrusted(f"bad path component {part!r}")
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def read_file(root: Path, relative: str | Path, limit: int) -> bytes:
    """The bytes of root/relative: a regular file with one link, at most `limit` bytes, reached without links."""
    parts = Path(relative).parts
    if not parts:
        raise Untrusted("empty path")
    try:
        with _dir_fd(root, parts[:-1]) as parent:
            fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise Missing(f"{relative} is not there") from None
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Untrusted(f"{relative} is a link") from None
        raise Untrusted(f"{relative}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Untrusted(f"{relative} is not a regular file")
        if info.st_nlink != 1:
            raise Untrusted(f"{relative} has {info.st_nlink} links")
        if info.st_size > limit:
            raise Untrusted(f"{relative} is {info.st_size} bytes (limit {limit})")
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise Untrusted(f"{relative} grew past {limit} bytes while read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json(root: Path, relative: str | Path, limit: int, max_depth: int = MAX_JSON_DEPTH) -> object:
    """The JSON value in root/relative, read as read_file does, nested at most `max_depth` deep: deeper (a planted
    file 200k brackets deep would exhaust the parser's recursion) or malformed text is refused, never raised."""
    data = read_file(root, relative, limit)
    depth = deepest = 0
    for token in _JSON_TOKEN.finditer(data):  # strings skipped whole: brackets inside them do not count
        first = token.group()[:1]
        if first == b'"':
            continue
        depth += 1 if first in b"[{" else -1
        deepest = max(deepest, depth)
        if deepest > max_depth:
            raise Untrusted(f"{relative} nests JSON deeper than {max_depth} levels")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise Untrusted(f"{relative} is not JSON ({str(exc)[:80]})") from None


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str  # 'dir', 'file' or 'other' (links, FIFOs, sockets, devices)
    mtime_ns: int


def entries(root: Path, relative: str | Path = "", limit: int = 10_000) -> list[Entry]:
    """The entries of root/relative (at most `limit`), sorted by name; nothing when it cannot be reached safely."""
    parts = Path(relative).parts if str(relative) else ()
    found: list[Entry] = []
    try:
        with _dir_fd(root, parts) as fd, os.scandir(fd) as listing:
            for entry in listing:
                info = entry.stat(follow_symlinks=False)
                kind = "dir" if stat.S_ISDIR(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "other"
                found.append(Entry(entry.name, kind, info.st_mtime_ns))
                if len(found) >= limit:
                    break
    except (OSError, Untrusted):
        return []
    return sorted(found, key=lambda e: e.name)


def walk_files(
    root: Path, relative: str = "", depth: int = 6, others: list[str] | None = None, limit: int = 10_000
) -> list[tuple[str, int]]:
    """(relative path, mtime_ns) of the regular files under root/relative, never through a link, `depth` deep,
    no more than `limit` entries looked at in all (a planted tree of folders is not walked whole); the paths of
    what is neither a file nor a folder (links, FIFOs...) added to `others`."""
    out: list[tuple[str, int]] = []
    pending = [(relative, depth)]
    seen = 0
    while pending and seen < limit:
        folder, left = pending.pop()
        for entry in entries(root, folder, limit=limit - seen):
            seen += 1
            path = f"{folder}/{entry.name}" if folder else entry.name
            if entry.kind == "file":
                out.append((path, entry.mtime_ns))
            elif entry.kind == "dir" and left > 0:
                pending.append((path, left - 1))
            elif entry.kind == "other" and others is not None:
                others.append(path)
    return sorted(out)
