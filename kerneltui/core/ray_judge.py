"""Judges as Ray actors (`pip install kerneltui[ray]`; `[ladder] executor = "ray"` or "ray://HOST:PORT"): one
actor per GPU of the cluster, each holding a `harness.judge.remote.RemoteServe` (a judge with warm workers) on its
node. An actor whose node dies is started again elsewhere and the evaluation in hand is asked again (Ray's
actor restarts and task retries); past those, the scheduler queues it again: never the version's failure.
"""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

from harness.contract.options import Options
from harness.judge.remote import DEFAULT_ROOT, RemoteServe
from kerneltui.core.remote import RemoteError, RemoteJudge

HARNESS = Path(__file__).resolve().parents[2] / "harness"
RESTARTS = 3  # actor restarts and call retries Ray makes before the scheduler hears of a lost judge


def connect(address: str) -> Any:
    """ray, initialised for `address` ("ray": RAY_ADDRESS or a local cluster; "ray://..." a Ray client;
    "ray:HOST:PORT" a cluster's GCS), the harness shipped to its nodes."""
    try:
        import ray
    except ImportError:
        raise RemoteError("executor ray needs Ray: pip install 'kerneltui[ray]'") from None
    if not ray.is_initialized():
        target = None if address == "ray" else address if address.startswith("ray://") else address[len("ray:") :]
        ray.init(
            address=target,
            runtime_env={"py_modules": [str(HARNESS)], "excludes": ["__pycache__"]},
            ignore_reinit_error=True,
            log_to_driver=False,
            include_dashboard=False,
        )
    return ray


def actor_count(ray: Any, judges: int) -> tuple[int, dict[str, Any]]:
    """One actor per GPU of the cluster (each holding one); on a cluster with none, `judges` of them on CPUs."""
    gpus = int(ray.cluster_resources().get("GPU", 0))
    return (gpus, {"num_gpus": 1}) if gpus else (max(1, judges), {"num_cpus": 1})


class RayJudge(RemoteJudge):
    def __init__(
        self,
        index: int,
        actor_options: dict[str, Any],
        options: Options,
        workspace_root: Path,
        state: Path,
        inbox: queue.Queue[tuple[str, Any, Any]],
        root: str = DEFAULT_ROOT,
    ) -> None:
        super().__init__(index, f"ray actor {index}", options, workspace_root, state, inbox)
        self.actor_options, self.remote_root = actor_options, root
        self.actor: Any = None

    def start(self) -> Any:
        import ray

        self.ready, self.remote_ws = False, None
        if self.actor is None:
            options = {"max_restarts": RESTARTS, "max_task_retries": RESTARTS, **self.actor_options}
            self.actor = ray.remote(RemoteServe).options(**options).remote(self.options_argv, self.remote_root)
        self.spawn(self._call, "ready")
        return None

    def send(self, bundle: dict[str, Any]) -> None:
        self.spawn(self._call, "evaluate", bundle)

    def _call(self, method: str, *args: Any) -> None:
        import ray

        actor = self.actor
        try:
            answer = ray.get(getattr(actor, method).remote(*args))
        except ray.exceptions.RayError as exc:
            if actor is self.actor:
                self.actor = None  # a new one at the next start
                self.lost(f"{self.where} was lost: {type(exc).__name__}: {str(exc)[:300]}")
            return
        for line in [answer] if isinstance(answer, str) else answer:
            self.relay(line)

    def stop(self, grace: float = 5.0) -> None:
        import ray

        actor, self.actor = self.actor, None
        if actor is not None:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
