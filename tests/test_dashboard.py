"""The real dashboard, driven by Textual's Pilot, over a real workspace and history file."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.widgets import DataTable, Input, TabbedContent
from textual.widgets.data_table import RowKey

from harness.contract.options import Options
from kerneltui.core.config import Config, LadderConfig
from kerneltui.core.judging.custody import pending_change
from kerneltui.core.workspace import Workspace
from kerneltui.history.store import Store
from kerneltui.ui.app import KernelTUI
from kerneltui.ui.messages import DetailLoaded, SnapshotLoaded
from kerneltui.ui.screens.dialogs import ConfirmScreen, HelpScreen, QuitScreen, RejectScreen
from kerneltui.ui.screens.problem_change import ProblemChangeScreen
from kerneltui.ui.widgets.agent import AgentPane
from kerneltui.ui.widgets.asm import AsmPane
from kerneltui.ui.widgets.profile import ProfilePane
from kerneltui.ui.widgets.rungs import RungsPane
from kerneltui.ui.widgets.text_view import TextView
from kerneltui.ui.widgets.versions import VersionTable
from tests import dashboard_fixtures
from tests.conftest import FIXTURES, VERDICT_RUNGS, VERSIONS, add_version, kerneltui, make_workspace
from tests.dashboard_fixtures import judged

SIZE = (160, 48)


async def wait_for(predicate, pilot, timeout: float = 60.0, step: float = 0.05) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the dashboard")
        await pilot.pause(step)


def table(app: KernelTUI) -> VersionTable:
    return app.query_one("#versions", VersionTable)


def status_of(app: KernelTUI, name: str) -> str:
    row = table(app).rows_by_key.get(name)
    return "" if row is None else str(row.get("status"))


def db(workspace: Path) -> sqlite3.Connection:
    return sqlite3.connect(workspace / ".kerneltui" / "history.db")


@pytest.fixture
def history(tmp_path: Path) -> Workspace:
    return dashboard_fixtures.build(tmp_path / "ws")


@pytest.mark.slow
async def test_two_piece_write_is_one_evaluation_and_its_row_progresses(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    add_version(folder, "hang", "v001.py")  # keeps the judge busy, so the next version waits in the queue
    config = Config(ladder=LadderConfig(debounce=0.2, options=Options(timeout=4, rungs=VERDICT_RUNGS)))
    app = KernelTUI(Workspace(folder.parent), config)
    seen: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: status_of(app, "v001") == "running", pilot, timeout=120)
        source = (VERSIONS / "good.py").read_text()
        target = folder / "v002.py"
        target.write_text(source[: len(source) // 2])
        await pilot.pause(0.8)  # longer than the debounce: only the parse check holds it back
        target.write_text(source)

        def recorded() -> bool:
            status = status_of(app, "v002")
            if status and (not seen or seen[-1] != status):
                seen.append(status)
            return status in ("pass", "fail")

        await wait_for(recorded, pilot, timeout=180, step=0.02)
        assert status_of(app, "v002") == "pass"
        assert status_of(app, "v001") == "fail"
    # the file may show before it is queued (a row with no status: not judged yet), never after
    progress = seen[1:] if seen[0] == "None" else seen
    assert progress[0] == "queued" and "running" in progress and progress[-1] == "pass", seen
    assert progress.index("queued") < progress.index("running") < progress.index("pass")
    with db(folder.parent) as conn:
        assert conn.execute("SELECT COUNT(*) FROM evaluations WHERE version = 'v002'").fetchone()[0] == 1
        failed = conn.execute("SELECT failed_rung FROM evaluations WHERE version = 'v001'").fetchone()[0]
    assert failed == "correctness"


@pytest.mark.slow
async def test_approve_reject_and_guidance_are_stored(history: Workspace) -> None:
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        table(app).move_cursor(row=table(app).order.index("v002"))
        await pilot.press("a")
        table(app).move_cursor(row=table(app).order.index("v003"))
        await pilot.press("r")
        assert isinstance(app.screen, RejectScreen)
        await pilot.press(*"mask [bug] on odd n")
        await pilot.press("enter")
        await pilot.press("r")
        await pilot.press("escape")  # a second reject, cancelled: nothing recorded
        assert not isinstance(app.screen, RejectScreen)
        await pilot.press("i")
        await pilot.press(*"try two blocks per program")
        await pilot.press("enter")
        await wait_for(lambda: table(app).rows_by_key["v003"].get("verdict") == "rejected", pilot)
        await wait_for(lambda: bool(app.snapshot.guidance), pilot)
    with db(history.root) as conn:
        verdicts = conn.execute("SELECT version, verdict, reason FROM verdicts ORDER BY id").fetchall()
        guidance = conn.execute("SELECT problem, text FROM guidance").fetchall()
    assert verdicts == [("v002", "approved", None), ("v003", "rejected", "mask [bug] on odd n")]
    assert guidance == [("vadd", "try two blocks per program")]
    rows = {
        r["version"]: r
        for r in __import__("json").loads(kerneltui("history", "--json", "--workspace", str(history.root)).stdout)
    }
    assert rows["v003"]["verdict"] == "rejected" and rows["v003"]["verdict_reason"] == "mask [bug] on odd n"


async def test_approving_a_failed_or_unjudged_version_asks_first_and_u_undoes(history: Workspace) -> None:
    """`a` approved a version that failed, or was never judged, without a word; and no verdict could be undone."""
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        table(app).move_cursor(row=table(app).order.index("v003"))  # failed at correctness
        await pilot.press("a")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen), pilot)
        assert "v003 failed at correctness. Approve it anyway?" in app.screen.question  # type: ignore[attr-defined]
        await pilot.press("n")
        await wait_for(lambda: not isinstance(app.screen, ConfirmScreen), pilot)
        table(app).move_cursor(row=table(app).order.index("v002"))  # passed: no question
        await pilot.press("a")
        await wait_for(lambda: table(app).rows_by_key["v002"].get("verdict") == "approved", pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("u")
        await wait_for(lambda: table(app).rows_by_key["v002"].get("verdict") == "withdrawn", pilot)
        await pilot.press("u")  # nothing standing now
        await wait_for(lambda: notified(app, "no verdict to undo in vadd"), pilot)
    with db(history.root) as conn:
        verdicts = conn.execute("SELECT version, verdict, reason FROM verdicts ORDER BY id").fetchall()
    assert verdicts == [("v002", "approved", None), ("v002", "withdrawn", "was approved")]
    feedback = (history.root / "vadd" / "FEEDBACK.md").read_text()
    assert "withdrew" in feedback or "withdrawn" in feedback, feedback


async def test_stale_versions_are_marked_and_b_asks_for_them_to_be_judged_again(history: Workspace) -> None:
    import hashlib

    from kerneltui.history.store import Store

    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        await pilot.press("B")
        await wait_for(lambda: notified(app, "no version here was judged against an older problem.py"), pilot)
        problem = history.root / "vadd" / "problem.py"
        problem.write_text(problem.read_text() + "\ntolerance = {'atol': 1e-7, 'rtol': 1e-7}\n")
        store = Store(history.db_path, create=False)
        store.ensure_problem("vadd", str(problem.parent), "", hashlib.sha256(problem.read_bytes()).hexdigest())
        store.close()  # as the scheduler records a changed problem.py
        await wait_for(lambda: bool(table(app).rows_by_key["v002"].get("stale")), pilot)
        await pilot.press("B")  # no judges in this session: it says so rather than nothing
        await wait_for(lambda: notified(app, "judging is off in this session"), pilot)


def test_kerneltui_approve_refuses_a_failed_version_without_force(history: Workspace) -> None:
    failed = str(history.root / "vadd" / "v003.py")
    refused = kerneltui("approve", failed)
    assert refused.returncode == 2 and "v003 failed at correctness: approve it anyway with --force" in refused.stderr
    forced = kerneltui("approve", failed, "--force")
    assert forced.returncode == 0, forced.stderr
    with db(history.root) as conn:
        assert conn.execute("SELECT version, verdict FROM verdicts").fetchall() == [("v003", "approved")]


async def test_cli_verdicts_show_within_two_seconds(history: Workspace) -> None:
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        done = await asyncio.to_thread(
            kerneltui, "reject", str(history.root / "vadd" / "v001.py"), "--reason", "too slow"
        )
        assert done.returncode == 0, done.stderr
        start = time.monotonic()
        await wait_for(lambda: table(app).rows_by_key["v001"].get("verdict") == "rejected", pilot, timeout=5)
        assert time.monotonic() - start < 2.0
        await asyncio.to_thread(kerneltui, "guide", "vadd", "use", "8", "warps", "--workspace", str(history.root))
        await wait_for(lambda: any(g["text"] == "use 8 warps" for g in app.snapshot.guidance), pilot, timeout=5)


@pytest.mark.slow
async def test_broken_problem_shows_an_error_and_the_app_keeps_running(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    add_version(folder, "good", "v001.py")
    (folder / "problem.py").write_text("import torch\n\ndef reference(a, b):\n    return a + b\n")
    app = KernelTUI(Workspace(folder.parent), Config(ladder=LadderConfig(options=Options(timeout=10))))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: status_of(app, "v001") == "error", pilot, timeout=120)
        title = str(app.query_one("#versions-title").render())
        assert "problem.py is missing make_inputs" in title
        rungs = app.query_one("#rungs-view", RungsPane)
        await wait_for(lambda: "missing make_inputs" in rungs.plain, pilot)
        await pilot.press("4", "1", "j", "k")  # still answering keys
        assert app.is_running
        shutil.copy(FIXTURES / "vadd" / "problem.py", folder / "problem.py")  # fixed on disk: judged once accepted
        await wait_for(lambda: pending_change(app.workspace, "vadd") is not None, pilot, timeout=60)
        await pilot.press("A")  # the change as a diff, then accepted: what it broke is judged again
        await wait_for(lambda: isinstance(app.screen, ProblemChangeScreen), pilot)
        assert "+def make_inputs" in app.screen.query_one(TextView).plain
        await pilot.press("y")
        await wait_for(lambda: status_of(app, "v001") == "pass", pilot, timeout=120)


async def test_keys_remapped_from_the_config(history: Workspace, tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text('[keys]\napprove = "A"\n')
    from kerneltui.core import config as config_mod

    app = KernelTUI(history, config_mod.load(config_file), run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        await pilot.press("a")
        await pilot.pause(0.3)
        await pilot.press("A")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen), pilot)  # v004 is not judged yet
        await pilot.press("y")
        await wait_for(lambda: table(app).rows_by_key["v004"].get("verdict") == "approved", pilot)
        # the command palette names the key in use (it said "key a" whatever the config mapped)
        from kerneltui.ui.commands import KernelCommands

        commands = {name: (run, key) for name, run, key in KernelCommands(app.screen).commands()}
        keys = {name: key for name, (_, key) in commands.items() if key}
        assert keys["Approve the selected version"] == "A" and keys["Search the pane on show"] == "/"
        app.call_later(commands["Help: keys"][0])  # as the palette runs a command it was given
        await wait_for(lambda: isinstance(app.screen, HelpScreen), pilot)
    with db(history.root) as conn:
        assert conn.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == 1


async def test_quit_asks_while_jobs_run(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    add_version(folder, "good", "v001.py")
    app = KernelTUI(Workspace(folder.parent), run_judges=False)  # queued, never judged
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: status_of(app, "v001") == "queued", pilot)
        await pilot.press("q")
        assert isinstance(app.screen, QuitScreen)
        await pilot.press("n")
        assert app.is_running and not isinstance(app.screen, QuitScreen)
        await pilot.press("q", "y")
        await wait_for(lambda: not app.is_running, pilot, timeout=10)


async def test_text_from_versions_is_shown_literally(history: Workspace) -> None:
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        table(app).move_cursor(row=table(app).order.index("v001"))
        rungs = app.query_one("#rungs-view", RungsPane)
        await wait_for(lambda: "[first try]" in rungs.plain, pilot)


async def asm_of_v002(app: KernelTUI, pilot: Any) -> AsmPane:
    """The Asm pane, showing v002's SASS."""
    await wait_for(lambda: len(table(app).order) == 4, pilot)
    table(app).move_cursor(row=table(app).order.index("v002"))
    await pilot.press("4")
    asm = app.query_one("#asm-pane", AsmPane)
    await wait_for(lambda: "LDG.E.128" in asm.view.plain, pilot)
    return asm


async def test_the_sass_diff_pairs_a_renamed_kernel_by_its_position(history: Workspace) -> None:
    with sqlite3.connect(history.db_path) as db:  # v002's one kernel renamed: v001 has no kernel of that name
        db.execute(
            "UPDATE artifacts SET kernel = 'add_kernel_wide' WHERE evaluation_id = "
            "(SELECT MAX(e.id) FROM evaluations e WHERE e.version = 'v002')"
        )
    db.close()
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        asm = await asm_of_v002(app, pilot)
        asm.view.focus()  # the Asm pane's own keys work where it has focus
        await pilot.press("c")
        await wait_for(lambda: "paired by position with add_kernel" in asm.view.plain, pilot)
        assert "--- v001 add_kernel" in asm.view.plain and "+++ v002 add_kernel_wide" in asm.view.plain
        assert "identical instruction streams" in asm.view.plain


async def test_asm_search_jumps_between_matches(history: Workspace) -> None:
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        asm = await asm_of_v002(app, pilot)
        assert "v002.py:12" in asm.view.plain  # source lines inlined
        spec = asm.spec_line().plain  # the kernel's specialisation as compiled
        assert "BLOCK=1024 · 4 warps · 3 stages · 26 regs · case n=16777216" in spec, spec
        assert "0x000fe2" not in asm.view.plain  # encodings dropped
        await pilot.press("slash", *"LDG", "enter")
        assert len(asm.view.matches) == 2 and asm.view.current == 0
        await pilot.press("n")
        assert asm.view.current == 1
        await pilot.press("n")
        assert asm.view.current == 0
        await pilot.press("c")  # SASS diff against the previous version
        await wait_for(lambda: "identical instruction streams" in asm.view.plain, pilot)


async def test_diff_cycles_previous_best_approved(history: Workspace) -> None:
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        table(app).move_cursor(row=table(app).order.index("v003"))
        await pilot.press("d")
        view = app.query_one("#diff-view")
        await wait_for(lambda: "--- v002 (previous)" in view.plain, pilot)  # type: ignore[attr-defined]
        await pilot.press("d")
        assert "--- v002 (best)" in view.plain  # type: ignore[attr-defined]
        await pilot.press("d")
        assert "No approved version" in view.plain  # type: ignore[attr-defined]


async def test_any_two_versions_are_diffed_by_marking_one(history: Workspace) -> None:
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        table(app).move_cursor(row=table(app).order.index("v004"))
        await pilot.press("m")
        view = app.query_one("#diff-view")
        table(app).move_cursor(row=table(app).order.index("v001"))
        await pilot.press("d")
        await wait_for(lambda: "--- v004 (marked)" in view.plain, pilot)  # type: ignore[attr-defined]
        assert "+++ v001" in view.plain and "Two blocks per program" in view.plain  # type: ignore[attr-defined]
        assert "marked" in str(app.query_one("#diff-title").render())
        await pilot.press("d")  # on to previous: v001 has none; marked stays among the targets
        await wait_for(lambda: "No previous version" in view.plain, pilot)  # type: ignore[attr-defined]


async def test_a_rewritten_file_is_diffed_against_what_it_held_before(history: Workspace) -> None:
    store = Store.open(history.db_path).store
    path = history.root / "vadd" / "v002.py"
    judged(store, history, path, path.read_text().replace("BLOCK 4096 and 8 warps.", "BLOCK 8192 now."), "pass", 50.0)
    store.close()
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        table(app).move_cursor(row=table(app).order.index("v002"))
        view = app.query_one("#diff-view")
        await pilot.press("d")
        await wait_for(lambda: "--- v001 (previous)" in view.plain, pilot)  # type: ignore[attr-defined]
        for _ in range(3):  # previous, best, approved, then the file's earlier content
            await pilot.press("d")
        await wait_for(lambda: "v002 as written before" in view.plain, pilot)  # type: ignore[attr-defined]
        assert "- " in view.plain and "BLOCK 4096 and 8 warps." in view.plain  # type: ignore[attr-defined]
        assert "BLOCK 8192 now." in view.plain  # type: ignore[attr-defined]


async def test_help_lists_the_keys(history: Workspace) -> None:
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("Static").render())
        for word in ("approve", "reject", "rebench", "cycle_pane"):
            assert word in text
        # keys as people write them (it said slash and question_mark), and what every mark means
        assert "  /  " in text and "  ?  " in text and "slash" not in text.replace("search", ""), text
        assert "question_mark" not in text
        for mark in ("⚑", "↻", "★", "▲ ▼ = ?", "○", "+N"):
            assert mark in text, mark
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_the_help_scrolls_on_a_small_terminal(history: Workspace) -> None:
    from textual.containers import VerticalScroll

    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await wait_for(lambda: isinstance(app.screen, HelpScreen), pilot)
        box = app.screen.query_one(VerticalScroll)
        await wait_for(lambda: box.max_scroll_y > 0, pilot)  # it was cut off, and did not scroll
        for _ in range(5):
            await pilot.press("j")
        await wait_for(lambda: box.scroll_y > 0, pilot)


def notified(app: KernelTUI, words: str) -> bool:
    return any(words in note.message for note in app._notifications)


@pytest.mark.slow
async def test_queue_survives_a_restart_and_files_written_while_away_are_judged(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    add_version(folder, "good", "v001.py")
    workspace = Workspace(folder.parent)
    app = KernelTUI(workspace, run_judges=False)  # queued, then kerneltui stops before judging it
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: status_of(app, "v001") == "queued", pilot)
    add_version(folder, "nan_output", "v002.py")  # written while kerneltui was not running
    app = KernelTUI(workspace, Config(ladder=LadderConfig(options=Options(timeout=10, rungs=VERDICT_RUNGS))))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: status_of(app, "v001") == "pass" and status_of(app, "v002") == "fail", pilot, 180)
        await wait_for(lambda: notified(app, "queue empty"), pilot, timeout=10)
        feedback = (folder / "FEEDBACK.md").read_text()  # for agents that read files: rewritten per evaluation
        assert "- v001: pass" in feedback and "- v002: fail, failed at correctness" in feedback
        draft = folder / "draft.txt"  # written elsewhere, then renamed in: one evaluation
        draft.write_text((VERSIONS / "good.py").read_text().replace("BLOCK 1024.", "BLOCK 1024, renamed in."))
        draft.rename(folder / "v003.py")
        await wait_for(lambda: status_of(app, "v003") == "pass", pilot, timeout=120)
        (folder / "v001.py").unlink()
        await wait_for(lambda: bool(table(app).rows_by_key["v001"].get("deleted")), pilot, timeout=10)
        assert status_of(app, "v001") == "pass"  # its history stays
    with db(folder.parent) as conn:
        counts = conn.execute("SELECT version, COUNT(*) FROM evaluations GROUP BY version ORDER BY version").fetchall()
    assert counts == [("v001", 1), ("v002", 1), ("v003", 1)]


@pytest.mark.slow
async def test_work_finished_after_shutdown_began_is_dropped(history: Workspace) -> None:
    # A snapshot or detail worker can post just before quit; shutdown removes the widgets before it
    # drains the queue. Handling such a message then must not raise (it once failed a run: NoMatches).
    app = KernelTUI(history, Config())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: table(app).row_count > 0, pilot)
        last = app.snapshot
        versions, problems = table(app), app.query_one("#problems", DataTable)
        tabs = app.query_one("#detail", TabbedContent)
        tab_activated = TabbedContent.TabActivated(tabs, tabs.get_tab(tabs.active))
        search, guidance = app.query_one("#search-box", Input), app.query_one("#guidance", Input)
    assert not app.is_running
    app.on_snapshot_loaded(SnapshotLoaded(last))
    app.on_detail_loaded(DetailLoaded(None))
    # So are the widgets' own messages: a cursor moved by the last snapshot (seen failing a run), a tab, a key.
    app.version_highlighted(DataTable.RowHighlighted(versions, 0, RowKey("v001")))
    app.problem_highlighted(DataTable.RowHighlighted(problems, 0, RowKey("other")))
    app.tab_activated(tab_activated)
    app.search_submitted(Input.Submitted(search, "ld.global"))
    app.guidance_submitted(Input.Submitted(guidance, "try a wider block"))
    app.on_key(events.Key("escape", None))


def test_vs_best_compares_times_from_one_kind_of_gpu() -> None:
    """The versions table's ★ and `vs best` took one minimum over every device: an A100's best read 0.50× beside
    an H200's."""
    from kerneltui.ui.widgets.versions import COLUMNS, best_median, row_cells

    rows = [
        {"name": "v002", "status": "pass", "median_us": 50.0, "device_name": "NVIDIA H200", "may_be_best": 1},
        {"name": "v001", "status": "pass", "median_us": 100.0, "device_name": "NVIDIA A100", "may_be_best": 1},
        {"name": "v003", "status": "pass", "median_us": 200.0, "device_name": "NVIDIA A100", "may_be_best": 1},
    ]
    bests = best_median(rows)
    column = [key for key, _, _ in COLUMNS].index("vsbest")
    vs_best = {row["name"]: row_cells(row, bests)[column].plain for row in rows}
    assert vs_best == {"v002": "★ best", "v001": "★ best", "v003": "0.50×"}


@pytest.mark.slow
async def test_an_agent_that_cannot_start_is_not_left_running(history: Workspace, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A failure before the agent's first turn (here its problem folder unreadable) left a phantom agent: `s`
    said one was already working and quitting counted it. Now it is said, recorded and gone."""
    from agents.replay import builtin_recordings
    from kerneltui.core.agents import host as agent_host

    def unreadable(*_: object) -> None:
        raise PermissionError("problem.py: permission denied")

    monkeypatch.setattr(agent_host, "problem_info", unreadable)
    config = Config(ladder=LadderConfig(options=Options(timeout=10)))
    config.agent.backend, config.agent.recording = "replay", str(next(iter(builtin_recordings().values())))
    app = KernelTUI(history, config)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        await pilot.press("s")
        await wait_for(lambda: notified(app, "agent on vadd stopped"), pilot)
        assert not app.agents and notified(app, "could not start: PermissionError")
    with db(history.root) as conn:
        reason = conn.execute("SELECT stop_reason FROM agent_sessions ORDER BY id DESC LIMIT 1").fetchone()[0]
    assert "could not start" in reason


@pytest.mark.slow
async def test_an_agent_paused_on_its_budget_goes_on_with_plus(tmp_path: Path) -> None:
    """A spent budget pauses the agent (said in the dashboard and where [notify] sends it); + grants the budget
    again and it goes on; x stops it while paused."""
    from agents.replay import builtin_recordings

    folder = make_workspace(tmp_path / "ws")
    config = Config(ladder=LadderConfig(options=Options(timeout=30, rungs=("load",))))
    config.agent.backend, config.agent.recording = "replay", str(builtin_recordings()["vecadd"])
    config.agent.pace, config.agent.max_versions = 0.0, 1
    app = KernelTUI(Workspace(folder.parent), config)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.snapshot.problem == "vadd", pilot)
        await pilot.press("plus")
        await wait_for(lambda: notified(app, "no agent of this dashboard is working on this problem"), pilot)
        await pilot.press("s")
        await wait_for(lambda: notified(app, "agent on vadd paused"), pilot, timeout=180)
        assert notified(app, "wrote 1 version (the budget)") and sorted(p.name for p in folder.glob("v*.py")) == [
            "v001.py"
        ]
        await pilot.press("5")
        agent_pane = app.query_one("#agent-view", AgentPane)
        await wait_for(lambda: "⏸ paused" in agent_pane.plain, pilot)  # type: ignore[attr-defined]
        await pilot.press("plus")
        await wait_for(lambda: notified(app, "granted 1 more version to the agent on vadd"), pilot)
        await wait_for(lambda: (folder / "v002.py").exists(), pilot, timeout=180)
        await wait_for(lambda: notified(app, "wrote 2 versions (the budget)"), pilot, timeout=180)
        await wait_for(lambda: "▶" in agent_pane.plain and "granted 1 more version" in agent_pane.plain, pilot)  # type: ignore[attr-defined]
        await pilot.press("x")
        await wait_for(lambda: notified(app, "agent on vadd stopped"), pilot, timeout=60)
        assert not (folder / "v003.py").exists()
    with db(folder.parent) as conn:
        reason = conn.execute("SELECT stop_reason FROM agent_sessions ORDER BY id DESC LIMIT 1").fetchone()[0]
    assert reason == "wrote 2 versions (the budget); stopped while paused"


async def test_a_deleted_version_is_struck_through_and_kept(history: Workspace) -> None:
    app = KernelTUI(history, Config(ladder=LadderConfig(debounce=0.2, options=Options(timeout=10))), run_judges=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        (history.root / "vadd" / "v001.py").unlink()
        await wait_for(lambda: bool(table(app).rows_by_key["v001"].get("deleted")), pilot, timeout=30)
        name = table(app).get_cell("v001", table(app).ordered_columns[0].key)
        assert "strike" in str(name.style), name.style


async def test_the_asm_pane_shows_the_listing_asked_for_last(history: Workspace, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Reading a listing runs in a thread that read the pane's state as it went and set the view when done:
    a slow SASS listing finishing after a quick switch to PTX replaced the PTX answer with stale SASS."""
    import threading

    from kerneltui.ui.widgets import asm as asm_module

    reading, release = threading.Event(), threading.Event()
    real = asm_module.sass_lines

    def slow_sass(*args: object) -> object:  # a big kernel: seconds to read and colour
        reading.set()
        release.wait(60)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(asm_module, "sass_lines", slow_sass)
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        table(app).move_cursor(row=table(app).order.index("v002"))
        await pilot.press("4")
        asm = app.query_one("#asm-pane", AsmPane)
        await wait_for(reading.is_set, pilot)
        asm.view.focus()
        await pilot.press("t")  # PTX: none was dumped, answered at once
        await wait_for(lambda: "No ptx for add_kernel" in asm.view.plain, pilot)
        release.set()  # the SASS reading ends last
        await wait_for(lambda: getattr(asm, "listings_read", 0) >= 2, pilot)
        await pilot.pause(0.1)
        assert asm.kind == "ptx", (asm.kind, app.focused)
        assert "No ptx for add_kernel" in asm.view.plain, asm.view.plain[:200]


async def test_background_work_that_fails_is_said(history: Workspace, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A worker thread's error (here reading a version's detail) vanished: the pane just stayed as it was."""
    from kerneltui.core.session import Session

    def broken(*_: object) -> None:
        raise RuntimeError("database disk image is malformed")

    monkeypatch.setattr(Session, "read_detail", broken)
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        table(app).move_cursor(row=table(app).order.index("v002"))
        await wait_for(lambda: notified(app, "detail failed: RuntimeError: database disk image"), pilot, timeout=30)
        assert app.is_running


async def test_a_finished_profile_shows_with_the_selected_versions_rungs(history: Workspace) -> None:
    """A profile (p) finished while its version was selected and never showed: it changed none of the row's
    keys the detail view is reloaded on."""
    from harness.contract.results import Evaluation, RungResult
    from harness.judge.rungs.profile import summarize
    from kerneltui.history.store import Store

    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4 and app.detail is not None, pilot)
        row = table(app).selected
        assert row is not None
        store = Store(history.db_path, create=False)
        profiled = store.start_evaluation(row["version_id"], "vadd", row["name"], row["file_hash"], {"kind": "profile"})
        metrics = summarize([{"name": "add_kernel", "time_us": 45.0, "dram_bytes": 2e8}], history.state / "p", {})
        ev = Evaluation(problem="vadd", version=row["name"], path=str(row["path"]), hash=row["file_hash"])
        ev.rungs.append(RungResult(name="profile", ok=True, metrics=metrics))
        ev.finish()
        store.finish_evaluation(profiled, ev)
        store.close()
        pane = app.query_one("#rungs-view", RungsPane)
        await wait_for(lambda: "DRAM 200.0 MB" in pane.plain, pilot, timeout=90)  # type: ignore[attr-defined]
        await pilot.press("6")  # the Profile pane: the call, then a row per kernel
        profile = app.query_one("#profile-view", ProfilePane)
        await wait_for(lambda: app.query_one("#detail", TabbedContent).active == "profile", pilot)
        text = profile.plain  # type: ignore[attr-defined]
        assert "1 kernel(s), 45 µs" in text and "DRAM 200.0 MB" in text, text
        assert "add_kernel" in text and "report " in text and "ncu-ui" in text, text


def test_max_err_is_red_outside_the_tolerance_and_green_inside() -> None:
    """ "max err" read the same for a failing and a passing version."""
    from kerneltui.ui.widgets.format import error_cell

    assert str(error_cell(1.84, {"status": "fail", "failed_rung": "correctness"}).style) == "red"
    assert str(error_cell(3e-7, {"status": "pass", "failed_rung": None}).style) == "green"
    assert str(error_cell(None, {"status": "fail"}).style) == "dim"


async def test_tab_never_stops_in_the_guidance_box_unless_i_was_pressed(history: Workspace) -> None:
    """tab stopped in the guidance box, so the next j became guidance text instead of moving the cursor."""
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        guidance = app.query_one("#guidance", Input)
        for _ in range(7):
            await pilot.press("tab")
            assert app.focused is not guidance
        await pilot.press("i")
        assert app.focused is guidance
        await pilot.press("j")
        assert guidance.value == "j"  # typed on purpose, after i
        await pilot.press("escape")
        assert app.focused is table(app)


async def test_the_detail_pane_shows_when_it_has_focus(history: Workspace) -> None:
    """The detail pane never showed that it had focus, though its keys work only then."""
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        detail = app.query_one("#detail", TabbedContent)
        unfocused = detail.styles.border_top
        for _ in range(3):
            if detail.has_focus_within:
                break
            await pilot.press("tab")
        assert detail.has_focus_within, app.focused
        await pilot.pause(0.1)
        assert detail.styles.border_top != unfocused and detail.styles.border_top[0] == "round"


async def test_the_asm_panes_keys_pressed_elsewhere_say_where_they_work(history: Workspace) -> None:
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        await pilot.press("t")  # the versions table has focus
        await wait_for(lambda: notified(app, "t works in the Asm pane"), pilot)
        table(app).move_cursor(row=table(app).order.index("v002"))
        await pilot.press("4")
        asm = app.query_one("#asm-pane", AsmPane)
        asm.view.focus()
        await pilot.press("t")
        await wait_for(lambda: asm.kind == "ptx", pilot)  # there, it does what it says


async def test_the_footer_keeps_help_and_quit_at_80_columns(history: Workspace) -> None:
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        from textual.widgets._footer import FooterKey

        def laid_out() -> dict[str, Any]:
            return {k.key: k.region for k in app.screen.query(FooterKey) if k.region.width > 0}

        await wait_for(lambda: {"question_mark", "q"} <= set(laid_out()), pilot)  # the footer drawn, not a sleep
        shown = laid_out()
        for key in ("question_mark", "q"):  # laid out inside the 80 columns, not cut off on the right
            assert shown[key].width > 0 and shown[key].right <= 80, shown


async def test_columns_give_way_by_priority_on_a_narrow_terminal(history: Workspace) -> None:
    """At 80x24 the versions table showed its first four columns in display order and scrolled sideways."""
    from kerneltui.ui.widgets.versions import COLUMNS, PRIORITY

    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        await pilot.pause(0.2)
        shown = [COLUMNS[i][0] for i in table(app).shown_columns]
        assert shown[:3] == ["ver", "status", "failed"], shown
        assert shown == [key for key, _, _ in COLUMNS if key in PRIORITY[: len(shown)]], shown  # the most wanted
        assert table(app).virtual_size.width <= table(app).scrollable_content_region.width + 1
    async with KernelTUI(history, run_scheduler=False).run_test(size=(200, 50)) as pilot:
        wide = pilot.app.query_one("#versions", VersionTable)
        await wait_for(lambda: len(wide.order) == 4, pilot)
        assert len(wide.shown_columns) == len(COLUMNS)


async def test_v_shows_the_source_as_judged_and_e_hands_the_file_to_the_editor(
    history: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kerneltui.ui.screens.source import SourceScreen

    opened = tmp_path / "opened.txt"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.delenv("VISUAL", raising=False)
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        table(app).move_cursor(row=table(app).order.index("v002"))
        await wait_for(lambda: app.detail is not None and app.detail.version["name"] == "v002", pilot)
        await pilot.press("v")
        await wait_for(lambda: isinstance(app.screen, SourceScreen), pilot)
        text = app.screen.query_one("#source-view").plain  # type: ignore[attr-defined]
        assert "def custom_kernel" in text and text.lstrip().startswith("1  "), text[:200]
        await pilot.press("escape")
        await wait_for(lambda: not isinstance(app.screen, SourceScreen), pilot)
        await pilot.press("e")  # headless here: the terminal cannot be handed over, and it says so
        await wait_for(lambda: opened.exists() or notified(app, "cannot be handed to an editor"), pilot)
        if opened.exists():
            assert opened.read_text().strip() == str(history.root / "vadd" / "v002.py")


async def test_f_filters_the_versions(history: Workspace) -> None:
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        table(app).move_cursor(row=table(app).order.index("v002"))
        await pilot.press("a")
        await wait_for(lambda: table(app).rows_by_key["v002"].get("verdict") == "approved", pilot)
        await pilot.press("f")
        await wait_for(lambda: table(app).order == ["v004", "v002", "v001"], pilot)  # the failed v003 hidden
        await pilot.press("f")
        await wait_for(lambda: table(app).order == ["v002"], pilot)
        cells = [str(c) for c in table(app).get_row("v002")]
        assert "★ best" in cells, cells  # the best among all versions, not only the shown
        await pilot.press("f")
        await wait_for(lambda: len(table(app).order) == 4, pilot)


async def test_with_no_gpu_the_trends_pane_shows_registers_and_spills(tmp_path: Path) -> None:
    """With no GPU there are no timings, and the Trends pane said only that: registers and spills, which the
    compile rung reads on any box, change from version to version too."""
    from harness.contract.results import Evaluation, RungResult
    from kerneltui.core.judging import runner
    from kerneltui.history.reads import resource_rows
    from kerneltui.history.store import Store
    from kerneltui.ui.widgets.trends import TrendsPane

    folder = make_workspace(tmp_path / "ws")
    workspace = Workspace(folder.parent)
    store = Store(workspace.db_path)
    for name, registers, spilled in (("v001", 40, 0), ("v002", 255, 128)):
        path = add_version(folder, "good", f"{name}.py")
        path.write_text(path.read_text() + f"\n# {name}\n")
        version_id, digest, problem = runner.record_version(store, workspace, path)
        evaluation_id = store.start_evaluation(version_id, problem, name, digest)
        kernels = [{"name": "add_kernel", "registers": registers, "spill_bytes": spilled}]
        ev = Evaluation(problem=problem, version=name, path=str(path), hash=digest, rungs=[
            RungResult("load", ok=True), RungResult("compile", ok=True, metrics={"kernels": kernels})])  # fmt: skip
        ev.finish()
        store.finish_evaluation(evaluation_id, ev)
    rows = resource_rows(store, "vadd")
    assert [(r["number"], r["case_label"], r["value"]) for r in rows] == [
        (1, "registers per thread", 40), (1, "bytes spilled", 0), (2, "registers per thread", 255),
        (2, "bytes spilled", 128),
    ]  # fmt: skip
    store.close()
    app = KernelTUI(workspace, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 2 and app.detail is not None, pilot)
        await pilot.press("3")
        pane = app.query_one("#trends-view", TrendsPane)
        await wait_for(lambda: pane.query_one("#trend-time").display, pilot)
        assert "Meanwhile, what each version's kernels use" in str(pane.query_one("#trends-empty").render())


async def test_the_problems_pane_gives_way_on_a_narrow_terminal(history: Workspace) -> None:
    """At 80 columns the problems pane narrows and drops its best % column: the versions table gets the room."""
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        problems = app.query_one("#problems", DataTable)
        assert problems.outer_size.width == 26 and [str(c.label) for c in problems.columns.values()] == [
            "problem",
            "latest",
        ]
        assert "event time" in [str(c.label) for c in table(app).columns.values()]
        await pilot.resize_terminal(160, 48)
        await wait_for(lambda: len(problems.columns) == 3, pilot)
        assert problems.outer_size.width == 34 and problems.get_row_at(0)[2].plain == "91% ★"


@pytest.mark.slow
async def test_a_problem_added_while_another_is_shown_leaves_the_view_where_it_was(tmp_path: Path) -> None:
    """Rebuilding the problems table (a problem folder added) put its cursor on the first row, and that highlight
    was taken as the person's choice: the view jumped to another problem."""
    from kerneltui.ui.widgets.problems import ProblemTable

    root = tmp_path / "ws"
    make_workspace(root)
    shutil.copytree(root / "vadd", root / "mvadd")
    app = KernelTUI(Workspace(root))  # its scheduler registers the problems it finds, the new one too
    async with app.run_test(size=SIZE) as pilot:
        problems = app.query_one("#problems", ProblemTable)
        await wait_for(lambda: problems.names == ["mvadd", "vadd"], pilot)
        app.select_problem("vadd")
        await wait_for(lambda: app.snapshot.problem == "vadd", pilot)
        shutil.copytree(root / "vadd", root / "avadd")
        await wait_for(lambda: "avadd" in problems.names, pilot)
        for _ in range(10):  # the spurious highlight's snapshot took well under this
            await pilot.pause(0.1)
            assert app.snapshot.problem == "vadd" and problems.selected == "vadd", (
                app.snapshot.problem,
                problems.selected,
            )
