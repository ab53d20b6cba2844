"""Workers forked from a template (harness.worker.template): ready in a blink, and as contained as a fresh worker.

Two workers of one template are alive at once whenever a version races the best's held worker: a version
in one must not reach the other's folder, inbox or process, nor the template's. Each case runs a pool in a
process of its own (the containment offer is read once per process), with and without bubblewrap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.containment.sandbox import landlock_abi

REPO = Path(__file__).parent.parent

SPY = r"""
import json, os, signal, sys
me = os.path.realpath(os.getcwd())  # its scratch folder
own = os.path.dirname(me)
slots = os.path.dirname(own)
found = {"own": os.path.basename(own), "slots": None, "slots_refused": None}
try:
    found["slots"] = sorted(os.listdir(slots))
except OSError as exc:  # Landlock: not its to list
    found["slots_refused"] = exc.strerror
try:
    with open(os.path.join(own, "inbox", "planted.py"), "w") as handle:
        handle.write("x")
    found["inbox_written"] = True
except OSError:
    found["inbox_written"] = False
found["other_read"] = []
for name in ("inbox/version.py", "scratch/secret.txt"):
    try:
        with open(os.path.join(OTHER, name)) as handle:
            found["other_read"].append(handle.read())
    except OSError:
        pass
found["signalled"] = []
mine = {int(t) for t in os.listdir("/proc/self/task")} | {os.getppid()}  # its threads (kill() takes their ids)
for pid in range(1, 1 << 15):  # any process it could name: the template, the other worker, their parents
    if pid not in mine:
        try:
            os.kill(pid, 0)
            found["signalled"].append(pid)
        except OSError:
            pass
found["judge_argv"] = any("WorkerPool" in arg for arg in sys.orig_argv + sys.argv)  # the judge's own script
print("SPY " + json.dumps(found), flush=True)


def custom_kernel(a, b):
    return a + b
"""

SCRIPT = r"""
import json, os, sys
if os.environ.get("FORK_SERVER"):  # as a judge starts: torch imported, then the fork server its templates come from
    import torch
    from harness.workers import fork_server
    fork_server.start()
from harness.workers import process as workers
pool = workers.WorkerPool(workers.Spawn(), keep_spare=False)
target = pool.take("run")
target.wait_ready()
(target.scratch / "secret.txt").write_text("the other worker's secret")
target.copy_in(b"SECRET = 'the other version'", "version.py")
spy = pool.take("run")
spy.wait_ready()
source = sys.argv[1].replace("OTHER", repr(str(target.root)))
reply, _ = spy.request({"op": "load", "path": str(spy.copy_in(source.encode(), "spy.py")), "dsls": []}, None, 60, "")
line = next((l for l in spy.log_tail().splitlines() if l.startswith("SPY ")), "SPY null")
assert reply.get("ok"), reply
print(json.dumps({"spy": json.loads(line[4:]), "load_ok": reply.get("ok"), "containment": spy.containment,
                  "other_alive": target.proc.poll() is None}))
pool.release(spy)
pool.release(target)
pool.close()
"""


def run_spy(env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, SPY],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("server", ["", "1"], ids=["template afresh", "template from the fork server"])
@pytest.mark.parametrize("bwrap", ["", "none"])
def test_a_forked_worker_reaches_neither_its_sibling_nor_the_template(bwrap: str, server: str) -> None:
    if bwrap == "none" and landlock_abi() < 1:
        pytest.skip("Landlock is not available on this kernel")
    found = run_spy({"FORK_SERVER": server, **({"KERNELTUI_BWRAP": bwrap} if bwrap else {})})
    spy = found["spy"]
    assert found["load_ok"] is True
    assert "namespaces" in found["containment"], found["containment"]
    if spy["slots"] is None:
        assert spy["slots_refused"], spy  # Landlock refused the listing
    else:
        assert spy["slots"] == [spy["own"]], spy  # the others' folders covered: its own alone
    assert spy["inbox_written"] is False  # its own inbox is the judge's: read-only
    assert spy["other_read"] == []  # not the other worker's version, not its scratch
    if "pid" in found["containment"].split(";")[1] or landlock_abi() >= 6:  # no pid namespace: Landlock scopes
        assert spy["signalled"] == [], spy["signalled"]  # neither the other worker nor the template
    assert found["other_alive"]
    assert not spy["judge_argv"]  # a fork of the judge keeps none of its command line


FORK_LOOP = r"""
import time
from pathlib import Path
from harness.workers.process import Spawn, WorkerFailure, WorkerPool
pool = WorkerPool(Spawn(), keep_spare=False)
source = Path("tests/exploits/fork_loop.py").read_bytes().replace(b"time.sleep(60)", b"time.sleep(300)")
for _ in range(4):
    worker = pool.take("run")
    worker.wait_ready()
    try:
        worker.request({"op": "load", "path": str(worker.copy_in(source, "loop.py")), "dsls": []}, None, 30, "")
        print("loaded")
    except WorkerFailure as exc:
        print(str(exc).splitlines()[0])
    pool.release(worker)
pool.close()
"""


@pytest.mark.slow
def test_a_fork_loop_killed_by_the_watch_leaves_nothing_holding_its_socket() -> None:
    """Killed mid-loop, a forked worker's children were orphaned past its outer process (which exited with its
    first one) to bubblewrap's init, still holding the worker's socket: the judge heard nothing until its
    timeout. The outer process is their subreaper and exits only once nothing is left beneath it."""
    done = subprocess.run(
        [sys.executable, "-c", FORK_LOOP], capture_output=True, text=True, timeout=600, cwd=REPO, env=os.environ
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = done.stdout.strip().splitlines()
    assert len(outcomes) == 4 and all(line.startswith("killed: it") for line in outcomes), outcomes


def test_the_harness_is_compiled_once_where_bytecode_may_be_written(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Workers write no bytecode: a module only they import was compiled from source at each worker's start."""
    import sys

    from harness.workers import env

    package = tmp_path / "harness"
    (package / "worker").mkdir(parents=True)
    (package / "worker" / "main.py").write_text("X = 1\n")
    monkeypatch.setattr(env, "PACKAGE_DIR", package)
    monkeypatch.setattr(env, "_COMPILED", [])
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # the person's PYTHONDONTWRITEBYTECODE: kept
    env.compiled_once()
    assert not list(package.rglob("*.pyc"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    env.compiled_once()
    env.compiled_once()  # once a process
    assert [p.parent.name for p in package.rglob("*.pyc")] == ["__pycache__"]


KEY_SCRIPT = r"""
import json
from harness.workers import process as workers
pool = workers.WorkerPool(workers.Spawn(), keep_spare=False)
worker = pool.take("run")
worker.wait_ready()
source = b"from triton.runtime.cache import triton_key\nprint('KEY', triton_key.cache_info().currsize, flush=True)\n"
source += b"def custom_kernel(a, b):\n    return a + b\n"
reply, _ = worker.request({"op": "load", "path": str(worker.copy_in(source, "v.py")), "dsls": []}, None, 60, "")
line = next((l for l in worker.log_tail().splitlines() if l.startswith("KEY ")), "KEY -1")
print(json.dumps({"ok": reply.get("ok"), "cached": int(line.split()[1]), "forked": worker.forked}))
pool.release(worker)
pool.close()
"""


@pytest.mark.slow
def test_a_fork_inherits_tritons_cache_key_hashed_once_by_the_template() -> None:
    """Triton hashes its whole install (libtriton: hundreds of MB) for its cache key at a process's first compile:
    the template does it once, so no worker pays it inside a verdict."""
    done = subprocess.run([sys.executable, "-c", KEY_SCRIPT], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"ok": True, "cached": 1, "forked": True}


SHARED = r"""
import json, os, sys
import torch
from harness.workers import fork_server
fork_server.start()
from harness.containment import watch
from harness.workers.process import Spawn, start_template
template = start_template(Spawn())
template.wait_ready(60)
pid = template.proc.pid
memory = {}
for line in open(f"/proc/{pid}/smaps_rollup").read().splitlines()[1:]:
    key, value = line.split(":")
    memory[key] = int(value.split()[0]) >> 10
status = dict(line.split(":\t", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":\t" in line)
found = {
    "forked": type(template.proc).__name__ == "NotChild",
    "level": watch.probe().level,
    "memory": memory,
    "caps": status["CapEff"].strip(),
    "own_mount_namespace": os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt"),
    "cmdline": open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace"),
    "log": template.log_tail(),
}
template.close()
found["ended"] = template.proc.poll() is not None
print(json.dumps(found))
"""


@pytest.mark.slow
@pytest.mark.parametrize("bwrap", ["", "none"])
def test_a_template_from_the_fork_server_shares_the_judges_torch_in_the_sandbox_the_box_gives(bwrap: str) -> None:
    """In bubblewrap's sandbox where there is one (its namespaces joined, no capability left); with none (Landlock's
    level, or KERNELTUI_BWRAP=none), a plain fork, as a template started afresh there runs."""
    env = {**os.environ, **({"KERNELTUI_BWRAP": bwrap} if bwrap else {})}
    done = subprocess.run(
        [sys.executable, "-c", SHARED], capture_output=True, text=True, timeout=120, cwd=REPO, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["forked"], found["log"]
    # torch's heap (~150 MB) is the judge's pages, not a copy: a template started afresh has ~160 MB of its own
    assert found["memory"]["Shared_Dirty"] > 100, found["memory"]
    assert found["memory"]["Private_Dirty"] < 60, found["memory"]
    assert found["own_mount_namespace"] is (found["level"] == "bwrap")
    if found["level"] == "bwrap":
        assert found["caps"] == "0000000000000000"  # as bubblewrap leaves its command, root or not
    assert "harness.worker.template" in found["cmdline"]  # what ps shows, not the judge's command line
    assert found["ended"]


HOLDS_A_KEY = r"""
import sys
from harness.workers import fork_server
fork_server.start()
print(fork_server.running().pid, flush=True)
sys.stdin.read()
"""


def memory_holds(pid: int, needle: bytes) -> bool:
    """Whether `needle` is anywhere in process `pid`'s readable memory (this process is its ancestor)."""
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split("-"))
            if "r" not in perms or "[vsyscall]" in line:
                continue
            try:
                mem.seek(start)
                if needle in mem.read(end - start):
                    return True
            except OSError:
                continue
    return False


def test_the_fork_server_keeps_no_trace_of_the_judges_environment() -> None:
    """Templates, and the workers that run versions, are forks of the fork server: a key in the environment of a
    judge started by hand must not be in their memory for a version to find."""
    key = os.urandom(16).hex().encode()
    env = {**os.environ, "SOME_SERVICE_API_KEY": key.decode()}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDS_A_KEY], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO, env=env
    )
    try:
        assert proc.stdout is not None
        server = int(proc.stdout.readline())
        assert memory_holds(proc.pid, key)  # the judge itself holds it: the search finds what is there
        assert not memory_holds(server, key)
    finally:
        proc.kill()
        proc.wait()


LATE_ANSWER = r"""
import json, tempfile
from pathlib import Path
from harness.contract.messages import TemplateRequest
from harness.workers import fork_server
from harness.workers.forks import Template
fork_server.start()
server = fork_server.running()
said = []
for wait_s in (-5, 30):  # the first asks and gives up at once; its answer comes late
    fork_server.START_TIMEOUT_S = wait_s
    root = Path(tempfile.mkdtemp())
    try:
        request = TemplateRequest((), "python", {}, str(root / "slots"))
        template = Template.forked(server, request, root, tempfile.TemporaryFile())
        said.append(f"pid {template.proc.pid}")
        template.close()
    except fork_server.ForkServerError as exc:
        said.append(str(exc))
print(json.dumps(said))
"""


def test_a_late_answer_from_the_fork_server_is_not_taken_for_the_next_requests() -> None:
    done = subprocess.run([sys.executable, "-c", LATE_ANSWER], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = json.loads(done.stdout.strip().splitlines()[-1])
    assert first == "the fork server did not answer"
    assert not second.startswith("pid"), second  # not the first request's template, taken for its own


def test_the_doctor_forks_its_worker_as_the_judge_does_and_says_where_its_template_came_from() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "doctor", "--json"], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-3000:]
    worker = json.loads(done.stdout)["worker"]
    assert worker["ok"], worker
    assert worker["template"] == "forked from the judge's fork server (shares its torch)"


NO_ZOMBIE = r"""
import json, os, time
from harness.containment import watch
from harness.workers import fork_server
from harness.workers.process import Spawn, start_template
fork_server.start()
watch.become_subreaper()  # as a judge is: whatever its descendants leave comes to it
def zombies():
    return {p.pid for p in watch.processes().values() if p.ppid == os.getpid() and p.zombie}
watch.probe()  # its trial sandboxes' own (the judge's watch reaps those at its next sweep)
time.sleep(1)
before = zombies()
for _ in range(2):
    template = start_template(Spawn())
    template.wait_ready(60)
    template.close()
time.sleep(3)  # each template's joiner ends after it
print(json.dumps(sorted(zombies() - before)))
"""


def test_a_template_that_ended_leaves_no_zombie_with_the_judge() -> None:
    """The process that joined bubblewrap's sandbox reaps bubblewrap before it exits: left to the judge (its
    workers' subreaper), each template a judge ended after an idle spell left a zombie bubblewrap. (With no
    bubblewrap on the box, there is no sandbox process to leave, and none may be left either.)"""
    done = subprocess.run([sys.executable, "-c", NO_ZOMBIE], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
