"""`kerneltui init NAME`: a new problem folder with a commented problem.py and a first version to fill in."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from kerneltui.core.workspace import Workspace, WorkspaceError

NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


def init_problem(workspace: Workspace, name: str) -> list[Path]:
    """Writes <workspace>/NAME/problem.py and v001.py (never over an existing folder); the files written."""
    if not NAME_RE.match(name):
        raise WorkspaceError(f"{name!r} is not a problem name: a letter, then letters, digits, - or _")
    folder = workspace.root / name
    if folder.exists():
        raise WorkspaceError(f"{folder} exists already: choose another name")
    folder.mkdir(parents=True)
    written = []
    for template, target in (("problem.py.txt", "problem.py"), ("v001.py.txt", "v001.py")):
        text = resources.files("kerneltui.core").joinpath("templates", template).read_text()
        (folder / target).write_text(text.replace("{name}", name))
        written.append(folder / target)
    return written
