"""For agents that speak neither ACP nor MCP: the feedback file, and guidance typed into a real tmux pane."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import dashboard_fixtures
from tests.conftest import kerneltui

READER = """
import sys
with open(sys.argv[1], "a") as out:
    for line in sys.stdin:
        out.write(line)
        out.flush()
"""


def test_verdicts_and_guidance_rewrite_the_feedback_file(tmp_path: Path) -> None:
    workspace = dashboard_fixtures.build(tmp_path / "ws")
    folder = workspace.root / "vadd"
    done = kerneltui("reject", str(folder / "v003.py"), "--reason", "wrong past 4096 [tail]")
    assert done.returncode == 0, done.stderr
    text = (folder / "FEEDBACK.md").read_text()
    assert "Best passing version: v002 (52 µs, 91% of roofline)" in text
    assert "- v003: fail, failed at correctness, rejected (wrong past 4096 [tail])" in text
    assert "case n=4097 (seed 1234): output: 1 of 4097 elements" in text  # the failing rung's message
    assert kerneltui("guide", "vadd", "keep the mask", "--workspace", str(workspace.root)).returncode == 0
    assert "keep the mask" in (folder / "FEEDBACK.md").read_text()
    assert not list(folder.glob(".FEEDBACK.md.*"))


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_guidance_is_typed_into_the_agents_tmux_pane(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path))  # a tmux server of this test's own
    monkeypatch.delenv("TMUX", raising=False)
    workspace = dashboard_fixtures.build(tmp_path / "ws")
    received = tmp_path / "received.txt"
    (tmp_path / "reader.py").write_text(READER)
    config = tmp_path / "config.toml"
    config.write_text('[tmux]\nvadd = "agent:0.0"\n')
    command = f"{sys.executable} -u {tmp_path / 'reader.py'} {received}"
    subprocess.run(["tmux", "new-session", "-d", "-s", "agent", "-x", "150", "-y", "30", command], check=True)
    try:
        time.sleep(0.5)
        said = "use 8 warps, not 4 [and keep the tail mask]"
        done = kerneltui("guide", "vadd", said, "--workspace", str(workspace.root), "--config", str(config))
        assert done.returncode == 0 and "typed into tmux pane agent:0.0" in done.stdout, done.stdout + done.stderr
        deadline = time.monotonic() + 10
        while not (received.exists() and said in received.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert received.read_text() == said + "\n"  # one line: pasted whole, then Enter
        with sqlite3.connect(workspace.db_path) as conn:
            delivered = conn.execute("SELECT delivered FROM guidance").fetchone()[0]
        assert delivered.endswith("tmux agent:0.0")
        config.write_text('[tmux]\nvadd = "nosuchsession:0.0"\n')
        done = kerneltui("guide", "vadd", "again", "--workspace", str(workspace.root), "--config", str(config))
        assert done.returncode == 0 and "warning: tmux paste-buffer failed" in done.stderr
    finally:
        subprocess.run(["tmux", "kill-server"], capture_output=True)
