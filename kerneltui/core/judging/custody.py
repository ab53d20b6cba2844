"""What is judged is the person's problem and the recorded bytes.

A problem's reference files are those harness.contract.problem_files names. The person accepts the reference
files: the accepted bytes are kept under .kerneltui/problems/<problem>/<digest>/ and their digest is the
problem's hash in the history. A change on disk is shown as a diff and judged against only once accepted.

A version's bytes are kept when the intake first reads them (.kerneltui/sources/<sha256>), and each evaluation
is judged in a folder of its own (.kerneltui/judging/<evaluation>/<problem>/) holding the accepted problem and
those bytes: a file swapped on disk after it was queued changes nothing of what is judged.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract import problem_files
from harness.contract.problem_files import digest_of
from harness.contract.results import Evaluation
from harness.contract.source import notes
from kerneltui.core.workspace import Workspace
from kerneltui.history.store import Store

DIFF_LINES = 400


class CustodyError(Exception):
    """A problem or version that cannot be judged as recorded; the message says why and what to do."""


def read_reference(folder: Path) -> dict[str, bytes]:
    """The folder's reference files (harness.contract.problem_files), a CustodyError where they cannot be judged."""
    try:
        return problem_files.read_reference(folder)
    except problem_files.ProblemFilesError as exc:
        raise CustodyError(str(exc)) from None


class Custody:
    """The accepted problems, the kept version bytes and the folders evaluations are judged in, of one workspace."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.problems = workspace.state / "problems"
        self.sources = workspace.state / "sources"
        self.judging = workspace.state / "judging"

    # --- problems ---------------------------------------------------------------------------------

    def keep_problem(self, problem: str, files: dict[str, bytes]) -> str:
        """Keeps these reference files as a candidate for acceptance; their digest."""
        digest = digest_of(files)
        target = self.problems / problem / digest
        if self.problem_files(problem, digest) is None:
            _write_folder(target, files)
        return digest

    def problem_files(self, problem: str, digest: str) -> dict[str, bytes] | None:
        """The kept files of that digest, checked against it; None when not kept (or no longer that digest)."""
        folder = self.problems / problem / digest
        if not folder.is_dir():
            return None
        files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink()}
        return files if digest_of(files) == digest else None

    def diff(self, problem: str, accepted: str, after: dict[str, bytes]) -> str:
        """The accepted reference files against `after` (those on disk, or a digest kept), as a unified diff."""
        before = self.problem_files(problem, accepted) or {}
        parts: list[str] = []
        for name in sorted(before.keys() | after.keys()):
            old, new = before.get(name), after.get(name)
            if old == new:
                continue
            if b"\0" in (old or b"")[:8192] + (new or b"")[:8192]:
                parts.append(f"binary {name}: {len(old or b'')} bytes -> {len(new or b'')} bytes\n")
                continue
            parts.extend(
                difflib.unified_diff(
                    _lines(old),
                    _lines(new),
                    f"accepted/{name}" if old is not None else "/dev/null",
                    f"changed/{name}" if new is not None else "/dev/null",
                )
            )
        lines = "".join(parts).splitlines()
        cut = f"\n[{len(lines) - DIFF_LINES} more lines]" if len(lines) > DIFF_LINES else ""
        return "\n".join(lines[:DIFF_LINES]) + cut

    # --- versions -----------------------------------------------------------------------------------

    def keep_source(self, data: bytes) -> str:
        """Keeps a version's bytes as read; their sha256."""
        digest = hashlib.sha256(data).hexdigest()
        path = self.sources / digest
        if self.source(digest) is None:
            _write_file(path, data)
        return digest

    def source(self, digest: str) -> bytes | None:
        """The kept bytes of that sha256, checked; None when not kept."""
        try:
            data = (self.sources / digest).read_bytes()
        except OSError:
            return None
        return data if hashlib.sha256(data).hexdigest() == digest else None

    # --- the folders evaluations are judged in ---------------------------------------------------------

    def stage(self, evaluation_id: int, problem: str, accepted: str, version: str, data: bytes) -> Path:
        """A folder holding the accepted problem and the version's bytes; the version file's path in it."""
        files = self.problem_files(problem, accepted)
        if files is None:
            raise CustodyError(
                f"{problem}: its accepted files ({accepted[:12]}) are no longer kept in {self.problems}: accept its "
                f"files as they are (the dashboard's A, or kerneltui accept-problem {problem})"
            )
        folder = self.judging / str(evaluation_id) / problem
        self.unstage(evaluation_id)
        _write_folder(folder, {**files, f"{version}.py": data})
        return folder / f"{version}.py"

    def unstage(self, evaluation_id: int) -> None:
        shutil.rmtree(self.judging / str(evaluation_id), ignore_errors=True)


@dataclass(frozen=True)
class Noticed:
    """A problem folder as the intake found it: the digest judged against, and one awaiting acceptance."""

    accepted: str
    pending: str | None = None
    first: bool = False  # accepted now, on first sight
    shown: bool = False  # the pending files were noticed before (said once)


def notice(store: Store, custody: Custody, folder: Path) -> Noticed:
    """Compares the folder's reference files with the accepted ones. Accepted on first sight (a problem new to
    the history, or one recorded before its files were kept, unchanged since); any other change awaits the
    person. The problem's row must exist. CustodyError or OSError when the files cannot be read."""
    name = folder.name
    files = read_reference(folder)
    digest = custody.keep_problem(name, files)
    accepted, pending = store.problem_digests(name)
    if accepted == digest:
        if pending:
            store.set_pending_problem(name, None)  # changed back to what was accepted
        return Noticed(digest)
    legacy = accepted == hashlib.sha256(files["problem.py"]).hexdigest()  # problem.py's own hash, files not kept
    if accepted is None or (legacy and custody.problem_files(name, accepted) is None):
        store.accept_problem(name, digest)
        if accepted:
            store.adopt_problem_digest(name, accepted, digest)
        return Noticed(digest, first=True)
    store.set_pending_problem(name, digest)
    return Noticed(accepted, digest, shown=pending == digest)


@dataclass(frozen=True)
class Accepted:
    digest: str
    diff: str  # what changed, against what was accepted before
    stale: int  # evaluations judged against an earlier problem


def accept(store: Store, custody: Custody, problem: str, digest: str | None = None) -> Accepted | None:
    """The person accepts a problem's files: `digest` (the pending files they were shown), else those on disk
    now. None when there is nothing new to accept. CustodyError when those files are not there."""
    folder = custody.workspace.problem_dir(problem)
    before, pending = store.problem_digests(problem)
    if before is None and pending is None:  # a problem new to the history: its row first
        store.ensure_problem(problem, str(folder), notes((folder / "problem.py").read_text(errors="replace")))
    if digest is None:
        digest = custody.keep_problem(problem, read_reference(folder))
    files = custody.problem_files(problem, digest)
    if files is None:
        raise CustodyError(f"{problem}: no files of digest {digest[:12]} are kept; run accept again")
    if digest == before:
        if pending:
            store.set_pending_problem(problem, None)
        return None
    diff = custody.diff(problem, before or "", files)
    return Accepted(digest, diff, store.accept_problem(problem, digest))


def stage_evaluation(store: Store, custody: Custody, evaluation_id: int, row: dict[str, Any]) -> Path:
    """The version file the judge gets for an evaluation (a row of evaluations): the bytes recorded for it beside
    the accepted problem, which the evaluation is recorded as judged against. CustodyError when it cannot be."""
    problem, version = str(row["problem"]), str(row["version"])
    data = custody.source(str(row["hash"])) or _unchanged_file(store, row)
    accepted, _ = store.problem_digests(problem)
    if accepted is None:  # never noticed yet (a one-off eval): noticed now
        accepted = notice(store, custody, custody.workspace.problem_dir(problem)).accepted
    store.set_judged_against(evaluation_id, accepted)
    return custody.stage(evaluation_id, problem, accepted, version, data)


def judged_other_bytes(store: Store, evaluation_id: int, evaluation: Evaluation) -> str | None:
    """Why a judge's result is not the evaluation's (it judged bytes other than those recorded), or None; then the
    result is recorded as judged against the accepted problem digest it was handed (the judge hashes problem.py
    alone), and as the version file's (not the folder it was judged in)."""
    row = store.evaluation(evaluation_id) or {}
    if evaluation.hash != row.get("hash"):
        return (
            f"not recorded: the judge judged other bytes ({evaluation.hash[:12]}) than those recorded for "
            f"{row.get('version')} ({str(row.get('hash'))[:12]})"
        )
    evaluation.problem_hash = row.get("problem_hash") or evaluation.problem_hash
    evaluation.path = store.version_path(int(row["version_id"])) or evaluation.path
    return None


def _unchanged_file(store: Store, row: dict[str, Any]) -> bytes:
    """A version recorded before its bytes were kept: its file, if it still holds the bytes recorded."""
    found = store.version_path(int(row["version_id"]))
    try:
        data = Path(found).read_bytes() if found else b""
    except OSError:
        data = b""
    if hashlib.sha256(data).hexdigest() != row["hash"]:
        raise CustodyError(
            f"{row['problem']}/{row['version']}.py changed after it was queued and the bytes recorded for it are not "
            "kept: not judged (the file as it is now is judged as a version of its own)"
        )
    return data


def pending_change(workspace: Workspace, problem: str) -> tuple[str, str] | None:
    """(digest, diff against the accepted) of a problem's files changed on disk and not accepted yet; or None."""
    store = Store.open(workspace.db_path, check=False).store
    try:
        accepted, pending = store.problem_digests(problem)
    finally:
        store.close()
    custody = Custody(workspace)
    files = custody.problem_files(problem, pending) if pending else None
    return None if files is None or pending is None else (pending, custody.diff(problem, accepted or "", files))


def _lines(data: bytes | None) -> list[str]:
    return [] if data is None else data.decode(errors="replace").splitlines(keepends=True)


def _write_file(path: Path, data: bytes) -> None:
    """Written whole or not at all (a file of its own renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".writing-")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.replace(temporary, path)


def _write_folder(folder: Path, files: dict[str, bytes]) -> None:
    """A folder of these files, made beside its place and renamed into it."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".writing-"))
    for name, data in files.items():
        (temporary / name).write_bytes(data)
    shutil.rmtree(folder, ignore_errors=True)
    try:
        os.replace(temporary, folder)
    except OSError:  # another kerneltui kept the same folder meanwhile: theirs stays
        shutil.rmtree(temporary, ignore_errors=True)
