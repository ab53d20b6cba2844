"""benchmarks/verdict_latency.py times a version to when the judge's events came, not to when the benchmark got
round to reading them: in a burst, every version is sent before any is waited on, and the first verdicts read
as 20.0 s, the length of the sending loop."""

from __future__ import annotations

import importlib.util
import io
import json
import threading
import time
import types
from pathlib import Path

from tests.conftest import REPO


def latency_module() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("verdict_latency", REPO / "benchmarks" / "verdict_latency.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_version_is_timed_to_when_its_events_came_not_to_when_they_were_read() -> None:
    events = [
        {"event": "rung", "id": "a002", "rung": {"name": "correctness"}},
        {"event": "done", "id": "a002", "evaluation": {"rungs": []}},
    ]
    module = latency_module()
    judge = module.Judge.__new__(module.Judge)  # its reader, with no judge server behind it
    judge.events, judge.lock = {}, threading.Lock()
    lines = "".join(json.dumps(e) + "\n" for e in events)
    judge.proc = types.SimpleNamespace(stdout=io.StringIO(lines), wait=lambda: 0)
    sent = time.perf_counter()
    judge._read()  # the judge's events come at once
    late = 1.0
    time.sleep(late)  # the benchmark is still sending other agents' versions
    timed = judge.wait(Path("a002.py"), sent)
    assert timed["rungs_at"]["correctness"] < late and timed["total_s"] < late, timed
