"""Steering by the line: lines chosen in a version's source or its diff, commented with C, reach the agent as
guidance quoting the version, where and the lines (the real dashboard under Textual's Pilot, and the CLI)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from textual.widgets import Input, TabbedContent

from kerneltui.core.comments import CommentError, comment_on, parse_range
from kerneltui.core.workspace import Workspace
from kerneltui.ui.app import KernelTUI
from kerneltui.ui.screens.source import SourceScreen
from kerneltui.ui.widgets.diff import DiffPane
from tests import dashboard_fixtures
from tests.conftest import kerneltui
from tests.test_dashboard import SIZE, table, wait_for


@pytest.fixture
def history(tmp_path: Path) -> Workspace:
    return dashboard_fixtures.build(tmp_path / "ws")


def guidance_of(root: Path) -> list[str]:
    with sqlite3.connect(root / ".kerneltui" / "history.db") as conn:
        return [text for (text,) in conn.execute("SELECT text FROM guidance ORDER BY id")]


def test_a_comment_quotes_its_lines_and_a_bad_range_is_said() -> None:
    lines = ["import torch", "", "def f(x):", "    return x + 1"]
    said = comment_on("v004", "v004.py", lines, 3, 4, "use a kernel").guidance()
    assert said.splitlines() == ["On v004, v004.py, lines 3-4:", "      3| def f(x):", "      4|     return x + 1",
                                 "use a kernel"]  # fmt: skip
    assert parse_range("12") == (12, 12) and parse_range("3-9") == (3, 9)
    for bad in ("0-2", "9-3", "x"):
        with pytest.raises(CommentError):
            parse_range(bad)
    with pytest.raises(CommentError, match="has 4 lines"):
        comment_on("v004", "v004.py", lines, 3, 7, "past the end")


async def test_lines_chosen_in_the_source_and_the_diff_go_to_the_agent_quoted(history: Workspace) -> None:
    app = KernelTUI(history, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        table(app).move_cursor(row=table(app).order.index("v002"))
        await wait_for(lambda: app.detail is not None and app.detail.version["name"] == "v002", pilot)
        source = app.detail.source.splitlines()  # type: ignore[union-attr]
        await pilot.press("v")
        await wait_for(lambda: isinstance(app.screen, SourceScreen), pilot)
        await pilot.press("C")  # nothing chosen yet: said, and the source stays open
        assert isinstance(app.screen, SourceScreen)
        await pilot.press("down", "down", "down", "shift+down", "shift+down")  # line 3, then 3 to 5
        await pilot.press("C")
        await wait_for(lambda: not isinstance(app.screen, SourceScreen), pilot)
        box = app.query_one("#guidance", Input)
        assert app.focused is box and "lines 3-5" in box.placeholder
        await pilot.press(*"why load twice?")
        await pilot.press("enter")
        await wait_for(lambda: len(app.snapshot.guidance) == 1, pilot)

        await pilot.press("d")  # the Diff pane, against the previous version
        diff = app.query_one("#diff-view", DiffPane)
        await wait_for(lambda: len(diff.lines) > 3, pilot)
        assert app.query_one("#detail", TabbedContent).active == "diff" and diff.target == "previous"
        diff.focus()
        await pilot.press("down", "down")
        await pilot.press("C")
        await pilot.press(*"keep this line")
        await pilot.press("enter")
        await wait_for(lambda: len(app.snapshot.guidance) == 2, pilot)
        shown_diff = [line.plain for line in diff.lines]
    said = guidance_of(history.root)
    assert said[0].splitlines()[0] == "On v002, v002.py, lines 3-5:", said[0]
    assert said[0].splitlines()[1:4] == [f"  {n:>5}| {source[n - 1]}" for n in (3, 4, 5)]
    assert said[0].endswith("why load twice?")
    assert said[1].startswith("On v002, the diff against ") and f"      2| {shown_diff[1]}" in said[1]
    assert said[1].endswith("keep this line")


def test_the_cli_comments_on_a_versions_lines(history: Workspace) -> None:
    version = history.root / "vadd" / "v002.py"
    done = kerneltui("comment", str(version), "--lines", "2-3", "mask", "the", "tail")
    assert done.returncode == 0, done.stderr
    lines = version.read_text().splitlines()
    assert guidance_of(history.root) == [
        f"On v002, v002.py, lines 2-3:\n      2| {lines[1]}\n      3| {lines[2]}\nmask the tail"
    ]
    past = kerneltui("comment", str(version), "--lines", "900", "x")
    assert past.returncode != 0 and "past its end" in past.stderr
