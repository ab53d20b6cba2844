"""The judges a ladder config asks for: one per local GPU (else `judges` of them), per ssh target's GPU, or per
GPU of a Ray cluster; for the scheduler and for a one-off `kerneltui eval` on a remote executor alike."""

from __future__ import annotations

import os
from collections.abc import Callable

from harness.containment.sandbox import cuda_device_count
from kerneltui.core.config import LadderConfig
from kerneltui.core.judging.client import JudgeClient, JudgeMessage, LocalProcess, harness_python
from kerneltui.core.workspace import Workspace


def visible_gpus(count: int) -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them to it (a judge pinned to "0" when kerneltui
    was given "2,3" would judge on GPU 0, someone else's)."""
    given = [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    return given[:count] if given and count else [str(i) for i in range(count)]


def make_judges(
    config: LadderConfig, workspace: Workspace, deliver: Callable[[JudgeMessage], None], once: bool = False
) -> list[JudgeClient]:
    """The judges the config asks for: one per local GPU (else `judges` of them), per ssh target's GPU, or per
    GPU of a Ray cluster. What they say goes to `deliver`. `once`: a local judge for one evaluation (no spare worker).
    RemoteError when a remote executor cannot be set up."""
    state, options = workspace.state, config.options
    first = config.executor[0]
    if first.startswith("ssh://"):
        from kerneltui.core.judging.ssh_judges import SshTarget, SshTransport

        targets = [SshTarget.parse(url) for url in config.executor]
        slots = [(t, g) for t in targets for g in (t.gpus or (None,))]
        ssh = config.ssh_options
        return [
            JudgeClient(i, SshTransport(i, t, g, ssh, options, workspace.root, state), deliver)
            for i, (t, g) in enumerate(slots)
        ]
    if first == "ray" or first.startswith("ray:"):
        from kerneltui.core.judging.ray_judges import RayTransport, actor_count, connect

        count, resources = actor_count(connect(first), config.judges)
        if config.ray_resources:
            resources = {**resources, "resources": dict(config.ray_resources)}
        return [
            JudgeClient(i, RayTransport(i, resources, options, workspace.root, state), deliver) for i in range(count)
        ]
    gpus = visible_gpus(cuda_device_count())
    slots_local: list[str | None] = list(gpus) if gpus else [None] * max(1, config.judges)
    python = config.python or harness_python()
    logs = state / "logs"
    return [
        JudgeClient(
            i, LocalProcess(python, options, state, gpu, once, None if once else logs / f"judge-{i}.log"), deliver
        )
        for i, gpu in enumerate(slots_local)
    ]
