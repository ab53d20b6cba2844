"""While something is timed, no other worker holding a version runs: a version's thread left running in an idle
worker would load the device (or here the CPU) while the reference or the best is timed, and its speedup would
grow with it. The pool runs in a process of its own (the containment offer is read once per process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).parent.parent

BUSY = r"""
import os, threading, time

def beat():
    with open("beat", "ab", buffering=0) as out:  # in its scratch folder
        while True:
            out.write(b".")
            time.sleep(0.005)

threading.Thread(target=beat, daemon=True).start()


def custom_kernel(a, b):
    return a + b
"""

SCRIPT = r"""
import json, sys, time
from harness.workers import process as workers
def beats(worker):
    try:
        return (worker.scratch / "beat").stat().st_size
    except OSError:
        return 0

def grows(worker, timeout=60):
    before, deadline = beats(worker), time.monotonic() + timeout
    while beats(worker) == before:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True

pool = workers.WorkerPool(workers.Spawn(), keep_spare=False)
busy, timed = pool.take("run"), pool.take("run")
for worker in (busy, timed):
    worker.wait_ready()
path = busy.copy_in(sys.argv[1].encode(), "v001.py")
reply, _ = busy.request({"op": "load", "path": str(path), "dsls": []}, None, 60, "")
assert reply.get("ok"), reply
found = {"beating": grows(busy)}
with pool.quiet(timed):
    first = beats(busy)
    time.sleep(0.5)  # while the other is timed: not one beat
    found["beats_while_quiet"] = beats(busy) - first
    found["timed_frozen"] = timed.frozen
found["beating_after"] = grows(busy)
with pool.quiet(timed):  # a request to a stopped worker starts it again first
    reply, _ = busy.request({"op": "exit_code_probe"}, None, 30, "")
    found["answered_while_others_quiet"] = "err" in reply or "ok" in reply
pool.release(busy)
pool.release(timed)
pool.close()
print("RESULT " + json.dumps(found))
"""


@pytest.mark.parametrize("bwrap", ["default", "none"])
def test_a_versions_thread_does_not_run_while_another_is_timed(bwrap: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if bwrap == "none":
        env["KERNELTUI_BWRAP"] = "none"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, BUSY], capture_output=True, text=True, env=env, timeout=300, cwd=REPO
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, done.stdout[-2000:] + done.stderr[-2000:]
    found = json.loads(line[len("RESULT ") :])
    assert found["beating"], found
    assert found["beats_while_quiet"] == 0, found
    assert not found["timed_frozen"], found
    assert found["beating_after"], found
    assert found["answered_while_others_quiet"], found


FAMILY = r"""
import os, subprocess, sys, threading, time
children = []
def spawn():  # a child forked by a thread that then ends: the kernel lists it under another of the process's
    children.append(subprocess.Popen(["sleep", "30"]))  # Popen returns once the child has exec'd
thread = threading.Thread(target=spawn)
thread.start()
thread.join()
code = "import subprocess; child = subprocess.Popen(['sleep', '30']); print('up', flush=True); child.wait()"
grandchild = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
grandchild.stdout.readline()
zombie = os.spawnlp(os.P_NOWAIT, "true", "true")  # never reaped
while open(f"/proc/{zombie}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
    time.sleep(0.01)
print("ready", flush=True)
time.sleep(30)
"""


def test_a_frozen_trees_processes_are_found_without_reading_every_process() -> None:
    """live_tree (what freeze and thaw read while something is timed) finds what a scan of all of /proc finds:
    children forked by a thread that ended, grandchildren, and no zombie."""
    from harness.containment.watch import live_tree, processes, tree

    proc = subprocess.Popen([sys.executable, "-c", FAMILY], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        found = sorted(live_tree(proc.pid))
        assert len(found) == 4  # the process, its sleep, the grandchild's Python and its sleep: not the zombie
        assert found == sorted(tree(proc.pid, processes()))
    finally:
        for pid in tree(proc.pid, processes())[::-1]:
            os.kill(pid, 9)
        proc.wait()
