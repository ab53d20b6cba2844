"""The history's connections shared between the dashboard's threads."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

# In a child process: the failure this guards against is a SIGSEGV, which would take pytest down with it.
CLOSE_WHILE_READING = """
import sys, threading, time
from pathlib import Path
from kerneltui.history.store import Store
from tests import dashboard_fixtures

workspace = dashboard_fixtures.build(Path(sys.argv[1]))
for _ in range(200):
    store = Store(workspace.db_path, create=False)
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            with store.held() as held:
                if held is None:
                    return
                held.version_rows("softmax")

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.002)
    store.close()
    done.set()
    reader.join()
print("closed 200 stores mid-read")
"""


def test_closing_a_store_another_thread_is_reading_waits_for_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [sys.executable, "-c", CLOSE_WHILE_READING, str(tmp_path / "ws")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert "closed 200 stores mid-read" in done.stdout
