"""The worker's timers are copies taken before a version is imported (harness.timing.frozen)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

PROBE = """
import harness.worker as worker
import harness.timing as timing
before = worker.TIMING
timing._elapsed = timing._record = timing._synchronize = None
timing.time_calls = timing.settled_calls = timing.warm_up = timing.median_ci_halfwidth = timing.do_nothing = None
g = before.time_calls.__globals__
assert g["_elapsed"] is not None and g["_record"] is not None and g["_synchronize"] is not None
assert g["warm_up"] is before.warm_up and g["median_ci_halfwidth"] is before.median_ci_halfwidth
assert before.settled_calls.__globals__["do_nothing"] is before.do_nothing
try:
    before.time_calls = None
except AttributeError:
    pass
else:
    raise AssertionError("the frozen timers can be replaced")
print("frozen")
"""


def test_patching_harness_timing_after_the_worker_starts_reaches_no_timer() -> None:
    # A fresh interpreter: the worker module binds its timers at import, as it does before a version loads.
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "frozen", done.stderr[-2000:]
