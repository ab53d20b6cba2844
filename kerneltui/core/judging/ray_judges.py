"""Judges as Ray actors (`pip install kerneltui[ray]`; `[ladder] executor = "ray"` or "ray://HOST:PORT"): one
actor per GPU of the cluster, each holding a `harness.judge.remote.RemoteServe` (a judge with warm workers) on its
node. An actor whose node dies is started again elsewhere and the evaluation in hand is asked again (Ray's
actor restarts and task retries); past those, the scheduler queues it again: never the version's failure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import PACKAGE_DIR
from harness.contract.options import Options
from harness.judge.remote import DEFAULT_ROOT, RemoteServe
from kerneltui.core.judging.client import Heard, serve_options
from kerneltui.core.judging.remote import RemoteError, RemoteRelay, spawn

HARNESS = PACKAGE_DIR  # this kerneltui's harness, shipped to the judge there
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


class RayTransport:
    """A judge in a Ray actor: started once, asked for each request from a thread of its own, its lines relayed."""

    def __init__(
        self,
        index: int,
        actor_options: dict[str, Any],
        options: Options,
        workspace_root: Path,
        state: Path,
        root: str = DEFAULT_ROOT,
    ) -> None:
        self.where = f"ray actor {index}"
        self.capacity = 1  # an actor call judges one request
        self.actor_options, self.remote_root = actor_options, root
        self.options_argv = serve_options(options, state)
        self.relay = RemoteRelay(self.where, workspace_root, state)
        self.actor: Any = None
        self.heard: Heard | None = None

    def start(self, heard: Heard) -> None:
        import ray

        self.relay.begin()
        self.heard = heard
        if self.actor is None:
            options = {"max_restarts": RESTARTS, "max_task_retries": RESTARTS, **self.actor_options}
            self.actor = ray.remote(RemoteServe).options(**options).remote(self.options_argv, self.remote_root)
        spawn(f"kerneltui-{self.where}", self._call, heard, "ready")

    def send(self, request: dict[str, Any]) -> None:
        assert self.heard is not None
        bundle = self.relay.bundle(request, self.heard)
        if bundle is not None:
            spawn(f"kerneltui-{self.where}", self._call, self.heard, "evaluate", bundle)

    def _call(self, heard: Heard, method: str, *args: Any) -> None:
        import ray

        actor = self.actor
        try:
            answer = ray.get(getattr(actor, method).remote(*args))
        except ray.exceptions.RayError as exc:
            if actor is self.actor:
                self.actor = None  # a new one at the next start
                heard.lost(self.relay.lose(f"{self.where} was lost: {type(exc).__name__}: {str(exc)[:300]}"))
            return
        for line in [answer] if isinstance(answer, str) else answer:
            self.relay.relay(line, heard)

    def tail(self, chars: int) -> str:
        return self.relay.tail(chars)

    def stop(self, grace: float) -> None:
        import ray

        actor, self.actor = self.actor, None
        if actor is not None:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
