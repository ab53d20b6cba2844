"""Workspaces: a folder of problem folders, each holding problem.py and its versions vNNN.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.contract.problem_files import LOOKS_LIKE_VERSION, VERSION_RE

STATE_DIR = ".kerneltui"


def ignored_version(path: Path) -> bool:
    """A file named like a version that is not one (vNNN.py): said once, rather than ignored silently."""
    return bool(LOOKS_LIKE_VERSION.match(path.name)) and not VERSION_RE.match(path.name)


class WorkspaceError(Exception):
    """A workspace or version path that cannot be used; the message says what to do."""


@dataclass(frozen=True)
class Workspace:
    root: Path

    @property
    def state(self) -> Path:
        return self.root / STATE_DIR

    @property
    def db_path(self) -> Path:
        return self.state / "history.db"

    def problems(self) -> list[Path]:
        return sorted(p.parent for p in self.root.glob("*/problem.py") if is_problem_dir(p.parent))

    def problem_dir(self, name: str) -> Path:
        folder = self.root / name
        if not (folder / "problem.py").is_file():
            known = ", ".join(p.name for p in self.problems()) or "none"
            raise WorkspaceError(f"no problem {name!r} in {self.root} (problems: {known})")
        return folder

    def versions(self, problem: str) -> list[Path]:
        folder = self.root / problem
        return sorted((p for p in folder.glob("v*.py") if VERSION_RE.match(p.name)), key=version_number)


def version_number(path: Path) -> int:
    match = VERSION_RE.match(path.name)
    return int(match.group(1)) if match else -1


def is_problem_dir(folder: Path) -> bool:
    """A folder holding problem.py, unless it is a Python package (a project's own problem module, such as harness/)."""
    return (folder / "problem.py").is_file() and not (folder / "__init__.py").exists()


def is_workspace(folder: Path) -> bool:
    return (folder / STATE_DIR).is_dir() or any(is_problem_dir(p.parent) for p in folder.glob("*/problem.py"))


def resolve(workspace: str | Path | None, cwd: Path | None = None) -> Workspace:
    """--workspace W, else the current folder when it holds problems or .kerneltui/, else ./kernels."""
    cwd = cwd or Path.cwd()
    if workspace is not None:
        root = Path(workspace).expanduser()
        if not root.is_dir():
            raise WorkspaceError(f"workspace {root} does not exist")
        return Workspace(root.resolve())
    if is_workspace(cwd):
        return Workspace(cwd.resolve())
    kernels = cwd / "kernels"
    if kernels.is_dir():
        return Workspace(kernels.resolve())
    raise WorkspaceError(
        f"{cwd} holds no problem folders and no ./kernels; pass --workspace W (a folder of <problem>/problem.py)"
    )


def for_version(path: Path) -> tuple[Workspace, str, str]:
    """The workspace, problem and version name of a version file: kernels/<problem>/vNNN.py."""
    path = path.resolve()
    if not path.is_file():
        raise WorkspaceError(f"no such version file: {path}")
    if path.suffix != ".py" or path.name == "problem.py":
        raise WorkspaceError(f"{path} is not a version file (expected <workspace>/<problem>/vNNN.py)")
    if not (path.parent / "problem.py").is_file():
        raise WorkspaceError(f"{path.parent} has no problem.py: a version lives beside its problem")
    return Workspace(path.parent.parent), path.parent.name, path.stem
