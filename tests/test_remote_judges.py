"""Judges on other machines: over SSH against a real sshd on this machine (its own host key and client key), and
the remote runner's own contract. The dashboard's side stays here: results, paths and dumps land in this workspace."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kerneltui.core.config import Config, executors
from kerneltui.core.judging.remote import bundle_for
from kerneltui.core.judging.scheduler import Scheduler, SchedulerEvent
from kerneltui.core.judging.ssh_judges import SshTarget
from kerneltui.core.workspace import Workspace
from tests.conftest import add_version, make_workspace

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
SLOW = '''"""Masked add, slow to import: time to cut its judge's connection while it is judged."""
import time

time.sleep(4)
''' + (Path(__file__).parent / "fixtures" / "versions" / "good.py").read_text().split('"""', 2)[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, list[str]]]:
    """An sshd on 127.0.0.1 letting this user in with a key made here; the ssh options that reach it."""
    if not (os.path.exists(SSHD) and shutil.which("ssh") and shutil.which("ssh-keygen")):
        pytest.skip("openssh-server is not installed (apt-get install openssh-server)")
    home = tmp_path_factory.mktemp("sshd")
    for name in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(home / name)], check=True)
    (home / "authorized_keys").write_text((home / "client.pub").read_text())
    os.chmod(home / "authorized_keys", 0o600)
    port = free_port()
    (home / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {home / 'host'}\n"
        f"AuthorizedKeysFile {home / 'authorized_keys'}\n"
        f"PidFile {home / 'sshd.pid'}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nPermitRootLogin yes\n"
        "KbdInteractiveAuthentication no\nLogLevel ERROR\n"
        f"SetEnv KERNELTUI_TRACE={os.environ['KERNELTUI_TRACE']}\n"  # its judges are counted with the run's
    )
    Path("/run/sshd").mkdir(exist_ok=True) if os.geteuid() == 0 else None
    server = subprocess.Popen([SSHD, "-D", "-e", "-f", str(home / "sshd_config")], stderr=subprocess.PIPE, text=True)
    options = ["-i", str(home / "client"), "-o", "UserKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=no"]
    options += ["-o", "LogLevel=ERROR"]
    deadline = time.monotonic() + 30
    while subprocess.run(["ssh", *options, "-p", str(port), "127.0.0.1", "true"], capture_output=True).returncode:
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            pytest.skip(f"sshd did not start here: {(server.stderr.read() if server.stderr else '')[-500:]}")
        time.sleep(0.2)
    yield port, options
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=10)


def events_until(events: queue.Queue[SchedulerEvent], done: int, timeout: float = 300) -> list[SchedulerEvent]:
    """Events until `done` evaluations finished (or failed)."""
    seen: list[SchedulerEvent] = []
    deadline = time.monotonic() + timeout
    while sum(e.kind in ("finished", "failed") for e in seen) < done:
        seen.append(events.get(timeout=max(1.0, deadline - time.monotonic())))
    return seen


def ssh_scheduler(workspace: Path, port: int, options: list[str], remote: Path) -> tuple[Scheduler, Any]:
    config = Config()
    config.ladder.executor = [f"ssh://127.0.0.1:{port}?python={sys.executable}&root={remote}"]
    config.ladder.ssh_options = options
    config.ladder.options = config.ladder.options.updated({"timeout": 60, "rungs": "load,compile,correctness,dumps"})
    events: queue.Queue[SchedulerEvent] = queue.Queue()
    return Scheduler(Workspace(workspace), config.ladder, events.put), events


@pytest.mark.slow
def test_versions_are_judged_over_ssh_and_their_dumps_come_back_but_not_a_problem_too_big_to_send(
    sshd: tuple[int, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundle that could not be made left the judge waiting on a reply that never came: the queue stalled. Now
    the too-big problem's version fails with the reason, and the others are judged."""
    from kerneltui.core.judging import remote

    monkeypatch.setattr(remote, "MAX_BUNDLE_BYTES", 64 << 10)
    port, options = sshd
    folder = make_workspace(tmp_path / "ws")
    (folder / "notes.txt").write_text("a file of the problem folder travels with it\n")
    add_version(folder, "good", "v001.py")
    add_version(folder, "pow2_only", "v002.py")
    big = folder.parent / "vadd_big"
    shutil.copytree(folder, big, ignore=shutil.ignore_patterns("v*.py"))
    (big / "weights.bin").write_bytes(b"\0" * (128 << 10))
    add_version(big, "good", "v001.py")
    scheduler, events = ssh_scheduler(folder.parent, port, options, tmp_path / "remote")
    scheduler.start()
    try:
        seen = events_until(events, 3)
        failed = [e for e in seen if e.kind == "failed"]
        assert len(failed) == 1 and "too much to send" in failed[0].data["error"], [(e.kind, e.data) for e in seen]
        assert scheduler.store is not None
        assert [r["status"] for r in scheduler.store.version_rows("vadd_big")] == ["error"]
        judge = next(e for e in seen if e.kind == "judge")
        assert judge.data["device"]["kind"] == "cpu"
        assert scheduler.judge_states()[0]["where"] == "ssh 127.0.0.1"
        assert scheduler.store is not None
        rows = {r["name"]: r for r in scheduler.store.version_rows("vadd")}
        assert rows["v001"]["status"] == "pass" and rows["v002"]["status"] == "fail"
        artifacts = scheduler.store.artifacts(rows["v001"]["evaluation_id"])
        assert artifacts and all(Path(a["path"]).is_file() for a in artifacts), artifacts
        assert all(str(folder.parent / ".kerneltui" / "dumps") in a["path"] for a in artifacts)
        evaluation = scheduler.store.evaluation(rows["v001"]["evaluation_id"]) or {}
        assert str(tmp_path / "remote") not in str(evaluation)  # the remote's paths never reach the history
    finally:
        scheduler.stop()
    assert not list((tmp_path / "remote" / "work").iterdir())  # work folders are removed once judged


@pytest.mark.slow
def test_a_connection_lost_mid_evaluation_is_judged_again_not_failed(
    sshd: tuple[int, list[str]], tmp_path: Path
) -> None:
    port, options = sshd
    folder = make_workspace(tmp_path / "ws")
    (folder / "v001.py").write_text(SLOW)
    scheduler, events = ssh_scheduler(folder.parent, port, options, tmp_path / "remote")
    scheduler.start()
    try:
        started = None
        while started is None:
            event = events.get(timeout=300)
            started = event if event.kind == "started" else None
        connection = scheduler.judges[0].transport.proc  # type: ignore[attr-defined]  (an SshTransport's)
        assert connection is not None
        os.killpg(connection.pid, signal.SIGKILL)  # the connection drops with v001 in hand
        seen = events_until(events, 1)
        warned = [e.data["message"] for e in seen if e.kind == "warning"]
        assert any("judging it again" in m for m in warned), warned
        assert scheduler.store is not None
        row = scheduler.store.version_rows("vadd")[0]
        assert row["status"] == "pass", row
        assert scheduler.store.rows("SELECT COUNT(*) AS n FROM evaluations")[0]["n"] == 1
    finally:
        scheduler.stop()


@pytest.mark.slow
def test_an_unreachable_host_is_said_and_nothing_is_failed(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    add_version(folder, "good", "v001.py")
    config = Config()
    config.ladder.executor = [f"ssh://127.0.0.1:{free_port()}"]
    config.ladder.ssh_options = ["-o", "ConnectTimeout=5"]
    events: queue.Queue[SchedulerEvent] = queue.Queue()
    scheduler = Scheduler(Workspace(folder.parent), config.ladder, events.put)
    scheduler.start()
    try:
        message = ""
        while "keeps stopping" not in message:
            event = events.get(timeout=120)
            message = event.data.get("message", "") if event.kind == "warning" else ""
        assert "Connection refused" in message or "ssh exit 255" in message, message
        assert scheduler.store is not None
        assert [r["status"] for r in scheduler.store.rows("SELECT status FROM evaluations")] == ["queued"]
    finally:
        scheduler.stop()


def test_targets_and_executors_are_checked() -> None:
    target = SshTarget.parse("ssh://me@gpu-box:2222?gpus=0,1&python=/opt/venv/bin/python")
    assert (target.host, target.port, target.gpus) == ("me@gpu-box", 2222, ("0", "1"))
    assert target.python == "/opt/venv/bin/python"
    assert executors("ray") == ["ray"] and executors(["ssh://a", "ssh://b"]) == ["ssh://a", "ssh://b"]
    for bad in ("slurm", ["ray", "ssh://a"], 3):
        with pytest.raises(ValueError):
            executors(bad)


def test_a_bundle_holds_the_problem_folder_the_version_and_the_best_it_races(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    for name in ("v001.py", "v002.py", "v003.py"):
        add_version(folder, "good", name)
    (folder / "data").mkdir()
    (folder / "data" / "weights.bin").write_bytes(b"\0" * 16)
    (folder / "FEEDBACK.md").write_text("not needed there")
    root = folder.parent.resolve()
    race = {"cpu": {"path": str(folder / "v001.py"), "hash": "h", "version": "v001"}}
    request = {"id": 3, "path": str(folder / "v003.py"), "best_us": {}, "race_with": race}
    bundle = bundle_for(root, request)
    assert sorted(bundle["files"]) == ["vadd/data/weights.bin", "vadd/problem.py", "vadd/v001.py", "vadd/v003.py"]
    assert bundle["request"]["path"] == "vadd/v003.py"
    assert bundle["request"]["race_with"]["cpu"]["path"] == "vadd/v001.py"


def test_a_bad_executor_on_the_command_line_is_a_usage_error(tmp_path: Path) -> None:
    from tests.conftest import kerneltui

    folder = make_workspace(tmp_path / "ws")
    done = kerneltui("agent", "vadd", "--workspace", str(folder.parent), "--executor", "slurm://x")
    assert done.returncode == 2 and "--executor: executor 'slurm://x'" in done.stderr, done.stderr


@pytest.mark.slow
def test_a_remote_python_without_torch_is_said(sshd: tuple[int, list[str]], tmp_path: Path) -> None:
    """A remote judge that could not start (no torch in that Python) left the judge never ready, and nothing said."""
    port, options = sshd
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    bare = str(tmp_path / "bare" / "bin" / "python")  # a venv of its own: no site-packages, so no torch
    assert subprocess.run([bare, "-c", "import torch"], capture_output=True).returncode != 0
    folder = make_workspace(tmp_path / "ws")
    add_version(folder, "good", "v001.py")
    scheduler, events = ssh_scheduler(folder.parent, port, options, tmp_path / "remote")
    scheduler.config.executor = [f"ssh://127.0.0.1:{port}?python={bare}&root={tmp_path / 'remote'}"]
    scheduler.start()
    try:
        message = ""
        deadline = time.monotonic() + 180
        while "keeps stopping" not in message:
            event = events.get(timeout=max(1.0, deadline - time.monotonic()))
            message = event.data.get("message", "") if event.kind == "warning" else ""
        assert "No module named 'torch'" in message, message
    finally:
        scheduler.stop()


@pytest.mark.slow
def test_kerneltui_eval_judges_on_the_executor_given(sshd: tuple[int, list[str]], tmp_path: Path) -> None:
    """`kerneltui eval VERSION --executor ssh://...`: one version judged on the GPU box, recorded here."""
    import json

    from tests.conftest import kerneltui

    port, options = sshd
    folder = make_workspace(tmp_path / "ws")
    version = add_version(folder, "good", "v001.py")
    config = tmp_path / "config.toml"
    config.write_text(f"[ladder]\nssh_options = {json.dumps(options)}\ntimeout = 60\n")
    target = f"ssh://127.0.0.1:{port}?python={sys.executable}&root={tmp_path / 'remote'}"
    done = kerneltui(
        "eval",
        str(version),
        "--config",
        str(config),
        "--executor",
        target,
        "--json",
        "--rungs",
        "compile,correctness,dumps",
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["status"] == "pass" and {"correctness", "dumps"} <= {r["name"] for r in result["rungs"]}
    dumps = next(r for r in result["rungs"] if r["name"] == "dumps")["metrics"]
    assert dumps["dir"].startswith(str(folder.parent / ".kerneltui")) and Path(dumps["dir"]).is_dir(), dumps
