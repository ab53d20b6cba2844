"""What an agent's session took, on the Agent pane: tokens, minutes, versions judged, the first pass and after how
long, and the median time from a new file to its verdict (read from a real history)."""

from __future__ import annotations

import shutil
from pathlib import Path

from kerneltui.core.workspace import Workspace
from kerneltui.history.store import Store
from kerneltui.ui.widgets.agent import session_figures_line
from tests.conftest import FIXTURES, VERSIONS
from tests.dashboard_fixtures import judged


def test_a_sessions_figures_count_the_versions_written_while_it_ran(tmp_path: Path) -> None:
    folder = tmp_path / "ws" / "vadd"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "vadd" / "problem.py", folder / "problem.py")
    workspace = Workspace(folder.parent)
    store = Store.open(workspace.db_path).store
    good = (VERSIONS / "good.py").read_text()
    judged(store, workspace, folder / "v001.py", good + "\n# before the agent\n", "pass", 50.0)
    session_id = store.start_agent_session("vadd", "claude", "claude-opus-4-6", 0)
    judged(store, workspace, folder / "v002.py", (VERSIONS / "pow2_only.py").read_text(), "fail", None)
    judged(store, workspace, folder / "v003.py", good + "\n# the agent's\n", "pass", 40.0)
    judged(store, workspace, folder / "v004.py", good + "\n# still queued\n", "queued", None)
    store.update_agent_session(session_id, input_tokens=12_400, output_tokens=900)
    session = store.agent_session(session_id)
    assert session is not None
    figures = store.session_figures(session)
    store.close()
    assert figures["judged"] == 2 and figures["first_pass"] == "v003"  # v001 came before it, v004 has no verdict
    assert 0 <= figures["first_pass_minutes"] < 1 and 0 <= figures["verdict_median_s"] < 60
    line = session_figures_line({**session, "figures": figures}).plain
    assert "12.4k in · 900 out tokens" in line and "2 judged" in line and "first pass v003 after" in line
    assert "new file → verdict" in line
