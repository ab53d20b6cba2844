"""A judge's context made by hand: what a rung's decisions read of the judge (options, device), and a pool that
refuses to start anything, so a test of those decisions runs no process."""

from __future__ import annotations

from typing import Any

import torch

from harness.contract.options import Options
from harness.judge.context import JudgeContext


class NoWorkers:
    """Any use of a worker fails the test: the decision under test must not need one."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the rung asked the pool for {name}: this test starts no process")


def context_without_workers(options: Options | None = None, device_info: dict[str, Any] | None = None) -> JudgeContext:
    return JudgeContext(
        options=options or Options(),
        pool=NoWorkers(),  # type: ignore[arg-type]
        device=torch.device("cpu"),
        device_info=device_info if device_info is not None else {"name": "CPU (x86_64), no GPU", "kind": "cpu"},
        aot_arch="sm_90",
    )
