"""Which files of a problem folder are the problem, and the one digest of them: the history's problem hash, the
kept copy's name, and what the judge reports it judged against are all this digest.

A problem's reference files are every regular file at the top of its folder but its versions (vNNN.py and files
named like them), FEEDBACK.md (written for agents) and hidden files: problem.py, the files its `version_files`
name, the sources an import copied in. Sub-folders are agents' scratch, never judged.
"""

from __future__ import annotations

import hashlib
import re
import stat
from pathlib import Path

VERSION_RE = re.compile(r"^v(\d+)\.py$")
LOOKS_LIKE_VERSION = re.compile(r"^[vV]\d+.*\.py$")  # v008_fast.py, V9.py: meant as versions, not judged
FEEDBACK_FILE = "FEEDBACK.md"
MAX_PROBLEM_BYTES = 64 << 20  # a problem folder's reference files, all together


class ProblemFilesError(ValueError):
    """A problem folder whose files cannot be read as a problem; the message says why."""


def is_reference_name(name: str) -> bool:
    """Whether a file at the top of a problem folder is one of its reference files (by name)."""
    if name.startswith(".") or name == FEEDBACK_FILE:
        return False
    return not (VERSION_RE.match(name) or LOOKS_LIKE_VERSION.match(name))


def read_reference(folder: Path) -> dict[str, bytes]:
    """The folder's reference files, name -> bytes (links to files are read through; they are the person's)."""
    found: dict[str, bytes] = {}
    total = 0
    for path in sorted(folder.iterdir()):
        if not is_reference_name(path.name):
            continue
        try:
            info = path.stat()
        except OSError:
            continue  # a dangling link: nothing to judge with
        if not stat.S_ISREG(info.st_mode):
            continue
        total += info.st_size
        if total > MAX_PROBLEM_BYTES:
            raise ProblemFilesError(
                f"{folder.name}: its files hold over {MAX_PROBLEM_BYTES >> 20} MiB, too much to judge"
            )
        found[path.name] = path.read_bytes()
    if "problem.py" not in found:
        raise ProblemFilesError(f"{folder.name}: no problem.py in {folder}")
    return found


def digest_of(files: dict[str, bytes]) -> str:
    """One digest for a set of named files: names, sizes and bytes, in name order (bytes as they are: CRLF or not,
    UTF-8 or not)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        data = files[name]
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def problem_digest(folder: Path) -> str:
    return digest_of(read_reference(folder))
