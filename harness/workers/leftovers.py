"""Folders a judge makes in the temporary directory (its worker template's, its fresh workers'), and those of
judges that died before removing them.

A judge ends its workers and removes their folders as it stops; killed instead (its dashboard's terminal
closed: the parent-death signal is SIGKILL; the OOM killer), it leaves them behind, scratch files and all, in a
/tmp that a GPU box keeps for months. Each folder names its owner (the judge's pid and that process's start
time, so a reused pid is not taken for it); a judge starting removes the folders whose owner is gone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from harness.containment import watch as containment

OWNER = ".owner"
PREFIXES = ("kerneltui-template-", "kerneltui-run-", "kerneltui-compile-")


def claim(folder: Path) -> None:
    """Names this process the owner of `folder`, one of PREFIXES in the temporary directory."""
    started = start_time(os.getpid())
    if started is not None:
        (folder / OWNER).write_text(f"{os.getpid()} {started}\n")


def sweep(where: Path | None = None) -> list[Path]:
    """Removes the folders in `where` (the temporary directory) that a judge of this user made and whose owner is
    no longer running; returns them. A folder naming no owner (being made, or a reader's) is left alone."""
    removed = []
    for folder in Path(where or tempfile.gettempdir()).iterdir():
        if folder.name.startswith(PREFIXES) and _ours(folder) and _owner_gone(folder):
            shutil.rmtree(folder, ignore_errors=True)  # never follows a link a worker left in it
            removed.append(folder)
    return removed


def start_time(pid: int) -> int | None:
    """When the process started (clock ticks since boot, /proc/<pid>/stat's 22nd field); None if it is gone."""
    fields = containment.stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 and fields[19].isdigit() else None


def _ours(folder: Path) -> bool:
    try:
        return not folder.is_symlink() and folder.is_dir() and folder.stat().st_uid == os.getuid()
    except OSError:
        return False


def _owner_gone(folder: Path) -> bool:
    try:
        pid, started = (int(part) for part in (folder / OWNER).read_text().split())
    except (OSError, ValueError):
        return False
    return start_time(pid) != started
