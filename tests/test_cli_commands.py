"""The `kerneltui` command's front: which commands take --workspace, what the parser is built from, and output
into a reader that stops early (`kerneltui history | head`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kerneltui.cli.entry import build_parser
from kerneltui.cli.options import workspace_given
from kerneltui.core.judging import runner
from kerneltui.core.workspace import WorkspaceError
from kerneltui.history.store import Store
from tests import dashboard_fixtures
from tests.conftest import REPO, kerneltui

# A command line for each command that works on a workspace, its other required arguments given. eval,
# profile, approve and reject take --workspace and ignore it (the version's path names its workspace).
WORKSPACE_COMMANDS = [
    ("eval", "v001.py"),
    ("profile", "v001.py"),
    ("sanitize", "v001.py"),
    ("history",),
    ("approve", "v001.py"),
    ("reject", "v001.py", "--reason", "slow"),
    ("guide", "vadd", "use", "8", "warps"),
    ("comment", "v001.py", "--lines", "3-4", "mask", "it"),
    ("rewind", "vadd", "v001"),
    ("agent", "vadd"),
    ("grant", "vadd"),
    ("mcp",),
    ("context", "index"),
    ("context", "search", "wgmma"),
    ("context", "fetch", "cutlass"),
    ("context", "add", "docs"),
    ("leaderboard",),
    ("export", "vadd", "--format", "gpumode"),
    ("accept-problem", "vadd"),
    ("gc",),
    ("init", "softmax"),
    ("dashboard",),
    ("serve-web",),
]
# The commands that do not: each says why
NO_WORKSPACE = {
    "agents": "the coding agents on this box",
    "doctor": "this box's containment",
    "config": "the config file",
    "demo": "a workspace of its own",
    "import": "--into: the workspace it writes into",
    "bench-agents": "--into: the bench workspace it creates",
}


def test_every_command_is_sorted_by_whether_it_takes_a_workspace() -> None:
    _, commands = build_parser()
    sorted_ = {argv[0] for argv in WORKSPACE_COMMANDS} | set(NO_WORKSPACE)
    assert sorted(sorted_) == sorted(commands.names), "a new command: add it to WORKSPACE_COMMANDS or NO_WORKSPACE"


@pytest.mark.parametrize("argv", WORKSPACE_COMMANDS, ids=" ".join)
def test_every_workspace_command_takes_workspace(argv: tuple[str, ...]) -> None:
    parser, _ = build_parser()
    args = parser.parse_args([*argv, "--workspace", "ws"])
    assert args.workspace == "ws"


@pytest.mark.parametrize("command", ["dashboard", "serve-web"])
def test_the_dashboards_workspace_is_the_folder_after_it_or_workspace(command: str, tmp_path: Path) -> None:
    parser, _ = build_parser()
    assert workspace_given(parser.parse_args([command, str(tmp_path)])) == str(tmp_path)
    assert workspace_given(parser.parse_args([command, "--workspace", str(tmp_path)])) == str(tmp_path)
    assert workspace_given(parser.parse_args([command, str(tmp_path), "--workspace", f"{tmp_path}/."])) == str(tmp_path)
    assert workspace_given(parser.parse_args([command])) is None
    with pytest.raises(WorkspaceError, match="two workspaces given"):
        workspace_given(parser.parse_args([command, str(tmp_path), "--workspace", str(tmp_path.parent)]))


@pytest.mark.parametrize("argv", [("--workspace",), ("dashboard", "--workspace"), ("serve-web", "--workspace")])
def test_the_dashboard_and_serve_web_look_for_the_workspace_given(argv: tuple[str, ...], tmp_path: Path) -> None:
    """Refused by argparse before; now the folder is looked for (and its absence said before any app starts)."""
    done = kerneltui(*argv, str(tmp_path / "missing"))
    assert done.returncode == 2
    assert f"error: workspace {tmp_path / 'missing'} does not exist" in done.stderr, done.stderr


def history_of(root: Path, evaluations: int) -> Path:
    """A workspace whose `kerneltui history` is longer than a pipe holds (64 KiB): 120 bytes an evaluation."""
    workspace = dashboard_fixtures.build(root)
    store = Store.open(workspace.db_path).store
    path = workspace.root / "vadd" / "v001.py"
    version_id, digest, problem = runner.record_version(store, workspace, path)
    for _ in range(evaluations):
        store.start_evaluation(version_id, problem, path.stem, digest, status="queued")
    store.close()
    return workspace.root


def history_into(reader_lines: int, workspace: Path) -> tuple[int, str]:
    """`kerneltui history` into a pipe whose reader reads this many lines, then closes it."""
    command = [sys.executable, "-m", "kerneltui", "history", "--workspace", str(workspace)]
    child = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
    assert child.stdout is not None and child.stderr is not None
    for _ in range(reader_lines):
        child.stdout.readline()
    child.stdout.close()
    stderr = child.stderr.read().decode()
    child.stderr.close()
    return child.wait(timeout=60), stderr


@pytest.mark.parametrize("reader_lines", [0, 2], ids=["gone at once", "after two lines"])
def test_history_into_a_reader_that_stops_early_ends_quietly(reader_lines: int, tmp_path: Path) -> None:
    code, stderr = history_into(reader_lines, history_of(tmp_path / "ws", 1000))
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr and "Exception ignored" not in stderr, stderr
    assert code == 128 + signal.SIGPIPE  # as a command SIGPIPE stopped: `set -o pipefail` still sees it


def test_history_read_to_the_end_is_unchanged(tmp_path: Path) -> None:
    done = kerneltui("history", "--workspace", str(history_of(tmp_path / "ws", 3)))
    assert done.returncode == 0 and done.stderr == ""
    assert len(done.stdout.splitlines()) == 1 + 4 + 3  # the heading, the four versions' and the three queued
