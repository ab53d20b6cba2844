"""The history's connections shared between the dashboard's threads."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run

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


def test_the_lowest_sqlite_utils_allowed_keeps_our_transactions(tmp_path: Path) -> None:
    """pyproject's floor for sqlite-utils, installed alone, builds a whole history: 3.36-3.39 commit inside
    their inserts (`with conn:`), which ended the store's own transactions early ("cannot commit")."""
    text = (REPO / "pyproject.toml").read_text()
    floor = re.search(r'"sqlite-utils>=([\d.]+)', text)
    assert floor, "pyproject.toml names no floor for sqlite-utils"
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    installed = subprocess.run([*pip, f"sqlite-utils=={floor.group(1)}"], capture_output=True, text=True)
    if installed.returncode != 0:
        pytest.skip(f"no package index here: {installed.stderr[-300:]}")
    code = (
        "import sys, sqlite_utils; from pathlib import Path; from tests import dashboard_fixtures\n"
        f"assert sqlite_utils.__file__.startswith({str(target)!r}), sqlite_utils.__file__\n"
        f"dashboard_fixtures.build(Path({str(tmp_path / 'ws')!r}))\n"
    )
    done = run(["-c", code], env={"PYTHONPATH": os.pathsep.join([str(target), str(REPO)])})
    assert done.returncode == 0, done.stderr[-2000:]
