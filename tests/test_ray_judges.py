"""Judges as Ray actors on a real local Ray cluster (CPUs only): versions judged there with their results and dumps
back in this workspace's history, while a node is killed mid-evaluation: the evaluation is judged again on the other
node and recorded once, never as the version's failure."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kerneltui.core.config import Config
from kerneltui.core.judging.scheduler import Scheduler, SchedulerEvent
from kerneltui.core.workspace import Workspace
from tests.conftest import add_version, make_workspace

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")
pytestmark = pytest.mark.slow  # a Ray cluster, and versions judged on it

SLOW = '''"""Masked add, slow to import: time to kill the node judging it."""
import time

time.sleep(6)
''' + (Path(__file__).parent / "fixtures" / "versions" / "good.py").read_text().split('"""', 2)[2]
FAST_HEALTH = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500, "health_check_failure_threshold": 3}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head with no CPU for judges and two nodes offering one judge each (the custom resource "judge")."""
    made = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "_system_config": FAST_HEALTH, "include_dashboard": False},
    )
    for _ in range(2):
        made.add_node(num_cpus=2, resources={"judge": 1})
    ray.init(address=made.address, log_to_driver=False)
    made.wait_for_nodes()
    yield made
    ray.shutdown()
    made.shutdown()


def scheduler_on(workspace: Path) -> tuple[Scheduler, queue.Queue[SchedulerEvent]]:
    config = Config()
    config.ladder.executor = ["ray"]
    config.ladder.ray_resources = {"judge": 1}
    config.ladder.options = config.ladder.options.updated({"timeout": 60, "rungs": "load,compile,correctness,dumps"})
    events: queue.Queue[SchedulerEvent] = queue.Queue()
    return Scheduler(Workspace(workspace), config.ladder, events.put), events


def wait_for(events: queue.Queue[SchedulerEvent], kinds: tuple[str, ...], count: int = 1) -> list[SchedulerEvent]:
    seen: list[SchedulerEvent] = []
    deadline = time.monotonic() + 300
    while sum(e.kind in kinds for e in seen) < count:
        seen.append(events.get(timeout=max(1.0, deadline - time.monotonic())))
    return seen


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def node_judging(made: Any) -> Any:
    """The cluster node whose raylet is an ancestor of the judge (`python -m harness serve`) at work."""
    raylets = {info.process.pid: node for node in made.list_all_nodes() for info in node.all_processes["raylet"]}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"harness" in argv and b"serve" in argv:
            pid = int(entry.name)
            while pid > 1 and pid not in raylets:
                pid = parent(pid)
            if pid in raylets:
                return raylets[pid]
    raise AssertionError("no judge process found under a Ray node")


def test_versions_are_judged_by_ray_actors_and_a_node_killed_mid_evaluation_is_retried_elsewhere(
    cluster: Any, tmp_path: Path
) -> None:
    folder = make_workspace(tmp_path / "ws")
    (folder / "v001.py").write_text(SLOW)
    add_version(folder, "pow2_only", "v002.py")
    scheduler, events = scheduler_on(folder.parent)
    scheduler.start()
    try:
        wait_for(events, ("started",))
        assert [s["where"] for s in scheduler.judge_states()] == ["ray actor 0"]  # no GPU: `judges` (1) of them
        deadline = time.monotonic() + 60
        while True:  # the actor's judge starts its worker: then its node goes
            try:
                node = node_judging(cluster)
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        cluster.remove_node(node, allow_graceful=False)
        seen = wait_for(events, ("finished", "failed"), 2)
        assert [e.kind for e in seen if e.kind in ("finished", "failed")] == ["finished"] * 2, [
            (e.kind, e.data) for e in seen
        ]
        assert scheduler.store is not None
        rows = scheduler.store.rows("SELECT version, status, error FROM evaluations ORDER BY version")
        assert [(r["version"], r["status"]) for r in rows] == [("v001", "pass"), ("v002", "fail")], rows
        judged = {r["name"]: r for r in scheduler.store.version_rows("vadd")}
        artifacts = scheduler.store.artifacts(judged["v001"]["evaluation_id"])  # its dumps came back from the node
        assert artifacts and all(Path(a["path"]).is_file() for a in artifacts), artifacts
    finally:
        scheduler.stop()
        cluster.add_node(num_cpus=2, resources={"judge": 1})  # the next test finds two nodes again
