"""`kerneltui demo`: the whole loop with nothing to set up (no GPU, no API key).

A fresh workspace in a temporary folder holds the problems of the shipped recordings; the dashboard
opens on it and a replay agent starts on each problem, writing the recorded versions at their pace
through the same ladder, history and panes as a live agent. Approve, reject and guidance work as
they do with one.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from agents.replay import builtin_recordings, load_recording
from kerneltui.core.config import Config, ConfigError, load
from kerneltui.core.workspace import Workspace


def demo_recordings() -> dict[str, Path]:
    """The shipped sessions this Python can judge: the CuTeDSL one only where nvidia-cutlass-dsl is installed."""
    return {
        problem: folder for problem, folder in builtin_recordings().items() if not load_recording(folder).missing_dsls()
    }


def make_demo_workspace(parent: Path | None = None) -> Workspace:
    root = Path(tempfile.mkdtemp(prefix="kerneltui-demo-", dir=parent)) / "kernels"
    for problem, recording in demo_recordings().items():
        (root / problem).mkdir(parents=True)
        shutil.copy(recording / "problem.py", root / problem / "problem.py")
    return Workspace(root)


def run_demo(pace: float = 1.0, keep: bool = False) -> int:
    from kerneltui.ui.app import KernelTUI

    try:
        config = load()
    except ConfigError:
        config = Config()  # a broken config file does not stop the demo
    config.tmux_panes = {}  # the person's agent panes are not the demo's
    config.agent.backend = "replay"
    config.agent.recording = None
    config.agent.pace = pace
    config.ladder.judges = max(config.ladder.judges, 2)  # problems side by side: two judges with no GPU
    workspace = make_demo_workspace()
    problems = sorted(demo_recordings())
    note = (
        f"demo: recorded agents write versions into {workspace.root}. "
        "a approves, r rejects, i sends guidance, s restarts an agent, q quits"
    )
    app = KernelTUI(workspace, config, autostart=problems, note=note)
    try:
        app.run()
    finally:
        if keep:
            print(f"the demo workspace stays in {workspace.root}: `kerneltui {workspace.root}` opens it again")
        else:
            shutil.rmtree(workspace.root.parent, ignore_errors=True)
    return 0
