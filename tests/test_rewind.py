"""Continue from a version: `kerneltui rewind PROBLEM vN` and the dashboard's z tell the problem's agent to take vN
as its base (guidance quoting vN's source), recorded in the history; the agent's next version is then compared
with vN as its previous one."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from kerneltui.core.judging import runner
from kerneltui.core.session import compare_targets
from kerneltui.core.workspace import Workspace
from kerneltui.history.store import Store
from kerneltui.ui.app import KernelTUI
from tests import dashboard_fixtures
from tests.conftest import kerneltui
from tests.test_dashboard import SIZE, table, wait_for


@pytest.fixture
def history(tmp_path: Path) -> Workspace:
    return dashboard_fixtures.build(tmp_path / "ws")


def rewinds_and_guidance(root: Path) -> tuple[list[tuple], list[str]]:
    with sqlite3.connect(root / ".kerneltui" / "history.db") as conn:
        rewinds = conn.execute("SELECT problem, version FROM rewinds ORDER BY id").fetchall()
        guidance = [text for (text,) in conn.execute("SELECT text FROM guidance ORDER BY id")]
    return rewinds, guidance


def previous_of(workspace: Workspace, name: str) -> str | None:
    opened = Store.open(workspace.db_path)
    try:
        rows = opened.store.version_rows("vadd")
        row = next(r for r in rows if r["name"] == name)
        previous = compare_targets(opened.store, row, "vadd", rows)["previous"]
    finally:
        opened.store.close()
    return previous["name"] if previous else None


def test_the_next_version_after_a_rewind_is_compared_with_the_version_rewound_to(history: Workspace) -> None:
    done = kerneltui("rewind", "vadd", "v002", "--workspace", str(history.root))
    assert done.returncode == 0 and "continues from v002" in done.stdout, done.stderr
    rewinds, guidance = rewinds_and_guidance(history.root)
    source = (history.root / "vadd" / "v002.py").read_text()
    assert rewinds == [("vadd", "v002")]
    assert guidance[-1].startswith("Rewind: continue from v002 (v002.py)") and source.strip() in guidance[-1]
    time.sleep(0.01)  # the history's times are in milliseconds
    new = history.root / "vadd" / "v005.py"
    new.write_text(source + "\n# from v002 again\n")
    opened = Store.open(history.db_path)
    runner.record_version(opened.store, history, new)
    opened.store.close()
    assert previous_of(history, "v005") == "v002"  # not v004, the version before it by number
    assert previous_of(history, "v004") == "v003"  # versions from before the rewind keep theirs
    missing = kerneltui("rewind", "vadd", "v099", "--workspace", str(history.root))
    assert missing.returncode != 0 and "no version v099" in missing.stderr


async def test_z_rewinds_the_agent_to_the_selected_version(history: Workspace) -> None:
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        table(app).move_cursor(row=table(app).order.index("v001"))
        await wait_for(lambda: app.detail is not None and app.detail.version["name"] == "v001", pilot)
        await pilot.press("z")
        await wait_for(lambda: any("Rewind" in g["text"] for g in app.snapshot.guidance), pilot, timeout=10)
    rewinds, guidance = rewinds_and_guidance(history.root)
    assert rewinds == [("vadd", "v001")] and guidance[-1].startswith("Rewind: continue from v001")
