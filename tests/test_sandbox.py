"""The worker's own confinement (harness.containment.sandbox), checked in a real subprocess started as the judge
does."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from harness.containment.sandbox import landlock_abi, seccomp_program
from tests.conftest import run

PROBE = """
import os, socket, sys
from harness.containment.sandbox import APPLIED
print("APPLIED", APPLIED)
scratch, secret, outside = sys.argv[1:4]
open(os.path.join(scratch, "ok"), "w").write("x")
for name, action in [
    ("write", lambda: open(outside, "w").write("pwned")),
    ("read", lambda: open(secret).read()),
    ("tcp", lambda: socket.create_connection(("127.0.0.1", 9), timeout=1)),
    ("unix", lambda: socket.socket(socket.AF_UNIX)),
    ("environ", lambda: open(f"/proc/{os.getppid()}/environ").read()),
]:
    try:
        action()
        print("ALLOWED", name)
    except OSError as exc:
        print("BLOCKED", name, exc.errno)
"""


@pytest.mark.skipif(landlock_abi() < 1, reason="Landlock is not available on this kernel")
def test_confined_process_reads_and_writes_only_what_it_needs(tmp_path: Path) -> None:
    scratch, probe_dir = tmp_path / "scratch", tmp_path / "inbox"
    scratch.mkdir()
    probe_dir.mkdir()
    (probe_dir / "probe_module.py").write_text(PROBE)
    secret = tmp_path / "secret.txt"
    secret.write_text("ANTHROPIC_API_KEY=sk-ant-xyz")
    outside = tmp_path / "history.db"
    argv = ["-m", "harness.containment.sandbox", "--scratch", str(scratch), "--read", str(probe_dir), "probe_module"]
    done = run([*argv, str(scratch), str(secret), str(outside)], env={"PYTHONPATH": str(probe_dir)})
    assert done.returncode == 0, done.stderr
    assert "landlock ABI" in done.stdout and "seccomp" in done.stdout and "no capabilities" in done.stdout
    assert (scratch / "ok").read_text() == "x"
    assert "BLOCKED write" in done.stdout and not outside.exists()
    assert "BLOCKED read 13" in done.stdout  # the person's files are out of reach, not only out of writing
    assert "BLOCKED unix 13" in done.stdout  # seccomp: no new sockets (no tmux or X11 socket)
    assert "BLOCKED environ 13" in done.stdout  # the judge's environment, through /proc
    if landlock_abi() >= 4:
        assert "BLOCKED tcp 13" in done.stdout


TIOCSTI_PROBE = """
import fcntl, sys, termios
try:
    fcntl.ioctl(int(sys.argv[1]), termios.TIOCSTI, b"x")
    print("INJECTED")
except OSError as exc:
    print("BLOCKED", exc.errno)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux's")
def test_no_keystrokes_into_a_terminal_it_holds(tmp_path: Path) -> None:
    """A version handed a terminal (an inherited descriptor of the person's tmux pane) cannot type into it."""
    import os
    import subprocess

    (tmp_path / "tiocsti_probe.py").write_text(TIOCSTI_PROBE)
    master, pty = os.openpty()
    argv = [sys.executable, "-m", "harness.containment.sandbox", "--scratch", str(tmp_path), "--read", str(tmp_path)]
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{Path(__file__).parent.parent}")
    done = subprocess.run(
        [*argv, "tiocsti_probe", str(pty)], pass_fds=(pty,), capture_output=True, text=True, env=env, timeout=60
    )
    os.close(master)
    os.close(pty)
    assert "BLOCKED 1" in done.stdout, done.stdout + done.stderr  # EPERM from the seccomp filter


def run_filter(program: list[tuple[int, int, int, int]], arch: int, number: int, arg1: int = 0) -> int:
    """What the BPF program returns for one system call: the few instructions it uses, run as the kernel would."""
    data = {0: number, 4: arch, 24: arg1}  # seccomp_data: nr, arch, low word of args[1]
    accumulator, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            accumulator, pc = data[k], pc + 1
        elif code == 0x15:  # BPF_JMP | BPF_JEQ | BPF_K
            pc += 1 + (jt if accumulator == k else jf)
        elif code == 0x35:  # BPF_JMP | BPF_JGE | BPF_K
            pc += 1 + (jt if accumulator >= k else jf)
        elif code == 0x06:  # BPF_RET | BPF_K
            return k
        else:
            raise AssertionError(f"an instruction this test does not know: {code:#x}")


def test_the_seccomp_filter_refuses_every_listed_call_and_allows_the_rest() -> None:
    """Each denied system call reaches its refusal: a jump that skipped the list allowed them all."""
    from harness.containment import sandbox

    allow, eperm, eacces = 0x7FFF0000, 0x00050001, 0x0005000D
    for machine, arch in (("x86_64", 0xC000003E), ("aarch64", 0xC00000B7)):
        program = seccomp_program(machine)
        for number in sandbox._DENIED_SYSCALLS[machine]:
            assert run_filter(program, arch, number) == eperm, (machine, number)
        assert run_filter(program, arch, sandbox._SOCKET[machine]) == eacces
        ioctl = sandbox._IOCTL[machine]
        assert run_filter(program, arch, ioctl, 0x5412) == eperm  # TIOCSTI
        assert run_filter(program, arch, ioctl, 0x541B) == allow  # FIONREAD: any other request
        for allowed in (0, 1, 3, 60, 63):  # read, write, close... (x86_64) / io_setup... (aarch64): not listed
            if allowed not in sandbox._DENIED_SYSCALLS[machine] and allowed not in (ioctl, sandbox._SOCKET[machine]):
                assert run_filter(program, arch, allowed) == allow, (machine, allowed)
        assert run_filter(program, 0x40000003, 0) == 0x80000000  # another architecture: killed


SETNS_PROBE = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.setns(-1, 0)  # a bad descriptor: EBADF from the kernel, EPERM where the filter refuses the call first
print("SETNS", ctypes.get_errno())
"""


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux's")
def test_a_confined_process_cannot_call_setns(tmp_path: Path) -> None:
    import os
    import subprocess

    (tmp_path / "setns_probe.py").write_text(SETNS_PROBE)
    argv = [sys.executable, "-m", "harness.containment.sandbox", "--scratch", str(tmp_path), "--read", str(tmp_path)]
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{Path(__file__).parent.parent}")
    done = subprocess.run([*argv, "setns_probe"], capture_output=True, text=True, env=env, timeout=60)
    assert "SETNS 1" in done.stdout, done.stdout + done.stderr


def test_seccomp_program_fits_one_byte_jumps() -> None:
    for machine in ("x86_64", "aarch64"):
        program = seccomp_program(machine)
        assert len(program) < 255 and all(jt < 256 and jf < 256 for _, jt, jf, _ in program)


NEW_WORKERS_ARE_NOT_ESCAPED = """
import subprocess, sys, tempfile, time
from pathlib import Path
from harness.containment import watch as containment
from harness.workers import forks
from harness.workers import process as workers
class StandIn:  # a worker as the watcher sees it: a child in a session of its own, some time to start
    def __init__(self, mode, spawn, interpret):
        self.proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
        time.sleep(0.003)
        scratch = Path(tempfile.mkdtemp())  # its own, empty: /tmp itself may be past the scratch limit
        self.watch = containment.Watch(self.proc.pid, scratch, containment.Limits(memory_bytes=1 << 40), None)

workers.WorkerProcess = StandIn
containment.Watcher.INTERVAL_S = 0.0005
pool = workers.WorkerPool(workers.Spawn(fork=False), reap=True)
started = [pool._spawn("run") for _ in range(120)]
# a worker template is such a child too
templates = [forks.Templates(lambda: StandIn("run", None, True), pool.watcher) for _ in range(120)]
started += [t.get() for t in templates]
time.sleep(0.2)
print("killed", sum(w.proc.poll() is not None for w in started))
for w in started:
    w.proc.kill()
"""


def test_a_worker_being_started_is_never_taken_for_an_escaped_process() -> None:
    """The watcher ends children of the judge it does not know: a worker (or worker template) it sees before its
    watch is added must not be one of them (under load, CI lost workers this way: 'exited early', a failed compile)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", NEW_WORKERS_ARE_NOT_ESCAPED],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "killed 0", done.stdout


def test_a_dsl_installed_with_pip_target_can_read_its_runtime_library(tmp_path: Path) -> None:
    """CuTeDSL as `pip install --target` lays it out: the package on PYTHONPATH is two folders below the
    runtime library its JIT links against (nvidia_cutlass_dsl/cu12/lib), which must be readable too."""
    site = tmp_path / "site"
    package = site / "nvidia_cutlass_dsl" / "dsl_packages" / "cutlass"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    library = site / "nvidia_cutlass_dsl" / "cu12" / "lib" / "libcute_dsl_runtime.so"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"\x7fELF")
    code = "import json\nfrom harness.containment.sandbox import read_roots\nprint(json.dumps(read_roots()))"
    result = run(["-c", code], env={"PYTHONPATH": os.pathsep.join([str(site), str(package.parent)])})
    assert result.returncode == 0, result.stderr
    roots = json.loads(result.stdout)
    assert any(str(library).startswith(root.rstrip("/") + "/") for root in roots), roots


@pytest.mark.slow
@pytest.mark.parametrize("bwrap", ["", "none"])
def test_a_child_still_running_when_its_worker_ends_is_ended_not_flagged(tmp_path: Path, bwrap: str) -> None:
    """A process the version started, still its worker's child (in a session of its own) when the worker exits,
    was orphaned alive for a moment and counted as an escape (and as the next version's when seen after the
    sweep): it is ended with the worker, and the version is not flagged; a daemon that left the tree still is."""
    import subprocess

    from tests.conftest import add_version, judge_many, make_workspace
    from tests.judges import LANDLOCK_ONLY

    folder = make_workspace(tmp_path / "ws")
    lingering = add_version(folder, "leaves_child_running", "v001.py")
    after = add_version(folder, "good", "v002.py")
    serve_args, env = LANDLOCK_ONLY if bwrap == "none" else ((), {})
    judged = judge_many([lingering, after], serve_args, env, rungs=["load", "compile", "correctness"])
    for name in ("v001", "v002"):
        assert judged[name]["status"] == "pass" and judged[name]["flags"] == [], (name, judged[name]["flags"])
    left = subprocess.run(["pgrep", "-f", "kerneltui-test-lingering-helper"], capture_output=True, text=True)
    assert left.stdout == "", left.stdout
