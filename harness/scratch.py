"""Reading what a kernel's worker left in its scratch folder, as data from a hostile writer.

The worker could have planted anything there: symlinks to the judge's /proc/self/environ or to the
person's files, hard links, FIFOs that block an open, files that grow while read, directories swapped
for links mid-walk. So every path is walked one component at a time from a descriptor of the scratch
folder with O_NOFOLLOW, only regular files with a single link are read, and no more than a cap.
"""

from __future__ import annotations

import contextlib
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


def walk_files(root: Path, relative: str = "", depth: int = 6) -> list[tuple[str, int]]:
    """(relative path, mtime_ns) of the regular files under root/relative, never through a link, `depth` deep."""
    out: list[tuple[str, int]] = []
    for entry in entries(root, relative):
        path = f"{relative}/{entry.name}" if relative else entry.name
        if entry.kind == "file":
            out.append((path, entry.mtime_ns))
        elif entry.kind == "dir" and depth > 0:
            out += walk_files(root, path, depth - 1)
    return out
