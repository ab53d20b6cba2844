"""The judges a ladder config asks for: one per local GPU (else `judges` of them), per ssh target's GPU, or per
GPU of a Ray cluster; for the scheduler and for a one-off `kerneltui eval` on a remote executor alike."""

from __future__ import annotations

import os
import queue
from typing import Any

from harness.containment.sandbox import cuda_device_count
from kerneltui.core.config import LadderConfig
from kerneltui.core.judge import Judge, harness_python
from kerneltui.core.workspace import Workspace


def visible_gpus(count: int) -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them to it (a judge pinned to "0" when kerneltui
    was given "2,3" would judge on GPU 0, someone else's)."""
    given = [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    return given[:count] if given and count else [str(i) for i in range(count)]


def make_judges(config: LadderConfig, workspace: Workspace, inbox: queue.Queue[tuple[str, Any, Any]]) -> list[Judge]:
    """The judges the config asks for: one per local GPU (else `judges` of them), per ssh target's GPU, or per
    GPU of a Ray cluster. RemoteError when a remote executor cannot be set up."""
    state, options = workspace.state, config.options
    first = config.executor[0]
    if first.startswith("ssh://"):
        from kerneltui.core.ssh_judge import SshJudge, SshTarget

        targets = [SshTarget.parse(url) for url in config.executor]
        slots = [(t, g) for t in targets for g in (t.gpus or (None,))]
        ssh = config.ssh_options
        return [SshJudge(i, t, g, ssh, options, workspace.root, state, inbox) for i, (t, g) in enumerate(slots)]
    if first == "ray" or first.startswith("ray:"):
        from kerneltui.core.ray_judge import RayJudge, actor_count, connect

        count, resources = actor_count(connect(first), config.judges)
        if config.ray_resources:
            resources = {**resources, "resources": dict(config.ray_resources)}
        return [RayJudge(i, resources, options, workspace.root, state, inbox) for i in range(count)]
    gpus = visible_gpus(cuda_device_count())
    slots_local: list[str | None] = list(gpus) if gpus else [None] * max(1, config.judges)
    python = config.python or harness_python()
    return [Judge(i, gpu, python, options, state, inbox) for i, gpu in enumerate(slots_local)]
