"""The history's connections shared between the dashboard's threads."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, VERSIONS, run

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


def test_best_and_trends_keep_to_one_kind_of_gpu(tmp_path: Path) -> None:
    """Best, best time and trends took every device together: an A100 run's 30 µs stood as the best beside
    an H200's 52 µs, and its timings joined the H200's line. Best now belongs to the GPU of the newest timing;
    trends draw a line per GPU."""
    from kerneltui.history.store import Store
    from tests import dashboard_fixtures

    workspace = dashboard_fixtures.build(tmp_path / "ws")
    store = Store(workspace.db_path, create=False)
    good = (VERSIONS / "good.py").read_text()
    folder = workspace.root / "vadd"
    dashboard_fixtures.judged(store, workspace, folder / "v005.py", good + "\n# a100\n", "pass", 30.0, "NVIDIA A100")
    dashboard_fixtures.judged(store, workspace, folder / "v006.py", good + "\n# again\n", "pass", 60.0)
    row = next(r for r in store.problem_rows() if r["name"] == "vadd")
    assert row["best_us"] == 52.0 and row["best_device"] == "NVIDIA H200", row
    best = store.best_passing("vadd")
    assert best is not None and best["version"] == "v002", best
    assert (store.best_passing_text("vadd") or "").startswith("v002")
    lines = {(r["case_label"], r["device_name"]) for r in store.trend_rows("vadd")}
    assert lines == {("n=16777216", "NVIDIA H200"), ("n=16777216", "NVIDIA A100")}
    store.close()


def test_trend_lines_split_by_gpu_only_when_there_are_several() -> None:
    from kerneltui.ui.widgets.trends import series

    rows = [
        {"number": 1, "case_label": "n=1", "median_us": 10.0, "device_name": "NVIDIA H200"},
        {"number": 2, "case_label": "n=1", "median_us": 9.0, "device_name": "NVIDIA H200"},
    ]
    assert set(series(rows, "median_us")) == {"n=1"}
    rows.append({"number": 2, "case_label": "n=1", "median_us": 20.0, "device_name": "NVIDIA A100"})
    assert series(rows, "median_us") == {"n=1 · NVIDIA H200": ([1, 2], [10.0, 9.0]), "n=1 · NVIDIA A100": ([2], [20.0])}


def test_a_version_budget_counts_only_what_the_session_wrote(tmp_path: Path) -> None:
    """An ACP agent's --max-versions counted every evaluation that finished after it started, old versions
    judged again at start among them: a budget of 2 ended the session before it wrote anything."""
    import time

    from kerneltui.core.agents.host import StoreHost, problem_info
    from kerneltui.history.store import Store, now
    from tests import dashboard_fixtures

    workspace = dashboard_fixtures.build(tmp_path / "ws")
    store = Store(workspace.db_path, create=False)
    time.sleep(0.01)  # the session starts after the old versions were recorded
    host = StoreHost(workspace, problem_info(workspace, "vadd", None), store, 1, started=now())
    folder = workspace.root / "vadd"
    good = (VERSIONS / "good.py").read_text()
    for name in ("v001", "v002"):  # judged again at start: the same content, old version rows
        dashboard_fixtures.judged(store, workspace, folder / f"{name}.py", (folder / f"{name}.py").read_text(),
                                  "pass", 50.0)  # fmt: skip
    assert host.session_versions() == 0 and len(host.finished()) == 2
    dashboard_fixtures.judged(store, workspace, folder / "v005.py", good + "\n# new\n", "pass", 40.0)
    assert host.session_versions() == 1
    store.close()


def test_a_changed_problem_marks_earlier_evaluations_stale(tmp_path: Path) -> None:
    """Editing problem.py (a new case, a tighter tolerance) left every earlier verdict standing as if it had
    been judged against the new problem."""
    import hashlib
    import json

    from kerneltui.history.store import Store
    from kerneltui.ui.widgets.format import status_cell
    from tests import dashboard_fixtures

    workspace = dashboard_fixtures.build(tmp_path / "ws")
    store = Store(workspace.db_path, create=False)
    assert not any(r["stale"] for r in store.version_rows("vadd"))
    problem = workspace.root / "vadd" / "problem.py"
    problem.write_text(problem.read_text() + "\ncases.append({'n': 12345})\n")
    store.ensure_problem("vadd", str(problem.parent), "", hashlib.sha256(problem.read_bytes()).hexdigest())
    rows = {r["name"]: r for r in store.version_rows("vadd")}
    assert rows["v001"]["stale"] and rows["v003"]["stale"] and not rows["v004"]["stale"]  # v004: only queued
    assert status_cell(rows["v001"]).plain.endswith("↻")
    store.close()
    listed = json.loads(run(["-m", "kerneltui", "history", "--json", "--workspace", str(workspace.root)]).stdout)
    assert {r["version"]: r["stale"] for r in listed if r["status"] != "queued"} == {
        "v001": True, "v002": True, "v003": True
    }  # fmt: skip


def test_latest_is_the_newest_file_not_the_newest_evaluation(tmp_path: Path) -> None:
    """Judging v002 again made it "latest" in the problems list though v004 was the newest file."""
    from kerneltui.history.store import Store
    from tests import dashboard_fixtures

    workspace = dashboard_fixtures.build(tmp_path / "ws")
    store = Store(workspace.db_path, create=False)
    good = (VERSIONS / "good.py").read_text()
    folder = workspace.root / "vadd"
    dashboard_fixtures.judged(store, workspace, folder / "v002.py", good + "\n# judged again\n", "pass", 50.0)
    row = next(r for r in store.problem_rows() if r["name"] == "vadd")
    assert (row["latest_version"], row["latest_status"]) == ("v004", "queued"), row
    (folder / "v004.py").unlink()
    store.mark_deleted("vadd", "v004")
    row = next(r for r in store.problem_rows() if r["name"] == "vadd")
    assert (row["latest_version"], row["latest_status"]) == ("v003", "fail"), row
    store.close()


def test_closing_the_session_while_a_thread_opens_its_readers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """close() went over the session's stores while a reading thread opened new ones: "dictionary changed size
    during iteration" (seen in CI, closing the dashboard while its detail loaded)."""
    from kerneltui.core.config import Config
    from kerneltui.core.session import Session
    from kerneltui.history.store import Store
    from tests import dashboard_fixtures

    workspace = dashboard_fixtures.build(tmp_path / "ws")
    session = Session(workspace, Config(), lambda event: None, run_scheduler=False)
    session.open_writer()
    real_close = Store.close
    reopened = []

    def close_and_race(store: Store) -> None:
        if not reopened:
            reopened.append(True)
            session.open_readers()  # as a reading thread would, in the middle of close()
        real_close(store)

    monkeypatch.setattr(Store, "close", close_and_race)
    session.close()
    assert reopened and session.closed


def test_a_reader_opened_on_a_history_gone_creates_no_file(tmp_path: Path) -> None:
    """A dashboard's reader reopened on a history deleted under it made an empty file there; the next dashboard
    took that for a history it could not read."""
    import sqlite3

    from kerneltui.history.store import Store

    path = tmp_path / ".kerneltui" / "history.db"
    with pytest.raises(sqlite3.OperationalError):
        Store(path, create=False)
    assert not path.exists()


async def test_a_dashboard_on_an_empty_history_file_makes_the_history(tmp_path: Path) -> None:
    """An empty history.db (left as above, or by a crash before the first migration): the dashboard stayed at
    "judge starting…" with no problem listed, its start-up failed on "no such table"; it now makes the history."""
    from kerneltui.core.config import Config
    from kerneltui.core.workspace import Workspace
    from kerneltui.history.schema import SCHEMA_VERSION, stored_version
    from kerneltui.history.store import Store
    from kerneltui.ui.app import KernelTUI
    from tests.conftest import FIXTURES
    from tests.test_dashboard import wait_for

    (tmp_path / "vadd").mkdir()
    (tmp_path / "vadd" / "problem.py").write_text((FIXTURES / "vadd" / "problem.py").read_text())
    (tmp_path / ".kerneltui").mkdir()
    (tmp_path / ".kerneltui" / "history.db").write_bytes(b"")
    app = KernelTUI(Workspace(tmp_path), Config(), run_scheduler=False)
    async with app.run_test(size=(100, 30)) as pilot:
        empty = app.snapshot
        await wait_for(lambda: app.snapshot is not empty, pilot)  # read and shown: the start-up went through
    history = Store(tmp_path / ".kerneltui" / "history.db", create=False)
    assert stored_version(history) == SCHEMA_VERSION
    history.close()
