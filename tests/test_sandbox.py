"""The worker's confinement, checked in a real subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.sandbox import landlock_abi
from tests.conftest import run

PROBE = """
import os, socket, sys
from harness.sandbox import confine
print(confine([sys.argv[1], "/dev", "/proc"]))
open(os.path.join(sys.argv[1], "ok"), "w").write("x")
for target in sys.argv[2:]:
    try:
        open(target, "w").write("pwned")
        print("WROTE", target)
    except OSError:
        print("BLOCKED", target)
try:
    socket.create_connection(("127.0.0.1", 9), timeout=1)
except OSError as exc:
    print("TCP", exc.errno)
"""


@pytest.mark.skipif(landlock_abi() < 1, reason="Landlock is not available on this kernel")
def test_confined_process_writes_only_to_its_scratch(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    outside = tmp_path / "history.db"
    done = run(["-c", PROBE, str(scratch), str(outside)])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("landlock ABI")
    assert f"BLOCKED {outside}" in done.stdout and not outside.exists()
    assert (scratch / "ok").read_text() == "x"
    if landlock_abi() >= 4:
        assert "TCP 13" in done.stdout  # EACCES: connect refused by the sandbox, not by the network
