"""A hundred imported problems listed as people count: 1_, 2_, ... 10_, 100_ (sorted as text: 100_, 10_, 11_ ... 1_)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kerneltui.history.reads import natural_key
from kerneltui.history.store import Store


def test_problems_are_listed_in_natural_order(tmp_path: Path) -> None:
    store = Store(tmp_path / "history.db")
    for name in ("100_HingeLoss", "10_3D_Tensor_matrix", "1_Square_matmul", "2_Standard_matmul", "softmax", "Add"):
        store.ensure_problem(name, str(tmp_path / name))
    names = [row["name"] for row in store.problem_rows()]
    assert names == ["1_Square_matmul", "2_Standard_matmul", "10_3D_Tensor_matrix", "100_HingeLoss", "Add", "softmax"]
    store.close()


def test_digits_compare_as_numbers_and_text_as_text() -> None:
    assert sorted(["v10", "v9", "v100", "a", "B2", "b10"], key=natural_key) == ["a", "B2", "b10", "v9", "v10", "v100"]


NAMES = [
    "1_Square_matrix_multiplication_", "12_Matmul_with_diagonal_matrices_", "13_Matmul_for_symmetric_matrices",
    "14_Matmul_for_upper_triangular_matrices", "19_ReLU", "20_LeakyReLU", "23_Softmax", "100_HingeLoss",
]  # fmt: skip


def dashboard_of_problems(root: Path, names: list[str]) -> Any:
    """The app on a workspace whose history knows these problems (one empty folder each), judging nothing."""
    from kerneltui.core.config import Config
    from kerneltui.core.workspace import Workspace
    from kerneltui.ui.app import KernelTUI

    store = Store(root / ".kerneltui" / "history.db")
    for name in names:
        (root / name).mkdir()
        store.ensure_problem(name, str(root / name))
    store.close()
    return KernelTUI(Workspace(root), Config(), run_scheduler=False)


async def test_slash_on_the_problems_list_filters_it_and_shows_full_names(tmp_path: Path) -> None:
    """A hundred KernelBench problems showed "12_Matmul_" to "18_Matmul_" as identical rows: `/` on the problems
    list keeps those whose name holds what is typed (case aside), the pane widened to their full names; empty: all."""
    from kerneltui.ui.widgets.problems import ProblemTable
    from tests.test_dashboard import wait_for

    app = dashboard_of_problems(tmp_path, NAMES)
    async with app.run_test(size=(80, 24)) as pilot:
        problems = app.query_one("#problems", ProblemTable)
        await wait_for(lambda: len(problems.names) == len(NAMES), pilot)
        assert problems.border_title == f"{len(NAMES)}:"  # no version judged yet: no verdict counted
        problems.focus()
        await pilot.press("slash", *"matmul_FOR", "enter")
        await wait_for(lambda: problems.names == [NAMES[2], NAMES[3]], pilot)
        assert problems.border_title == f"2 of {len(NAMES)}:"
        name_column = problems.columns_shown[0]
        assert name_column[2] >= len(NAMES[3]) and "matmul_FOR" in name_column[1]
        await wait_for(lambda: app.snapshot.problem == NAMES[2], pilot)  # the shown problem was filtered out
        await pilot.press("slash", "ctrl+u", "enter")  # empty: every problem again, the pane as it was
        await wait_for(lambda: len(problems.names) == len(NAMES), pilot)
        assert problems.columns_shown[0][2] == 9 and problems.filter_text == ""


async def test_slash_on_a_fresh_dashboard_filters_the_problems(tmp_path: Path) -> None:
    """A new user's first `/` on a hundred problems, no version judged: the versions table has focus and its pane
    nothing to search ("nothing to search in this pane" was all it said); it filters the problems list."""
    from kerneltui.ui.widgets.problems import ProblemTable
    from tests.test_dashboard import wait_for

    app = dashboard_of_problems(tmp_path, NAMES)
    async with app.run_test(size=(80, 24)) as pilot:
        problems = app.query_one("#problems", ProblemTable)
        await wait_for(lambda: len(problems.names) == len(NAMES), pilot)
        assert app.focused is not problems
        await pilot.press("slash", *"relu", "enter")
        await wait_for(lambda: problems.names == [NAMES[4], NAMES[5]], pilot)
        assert app.focused is problems


def test_the_problems_title_counts_their_newest_verdicts() -> None:
    from kerneltui.ui.widgets.problems import counts_title

    rows = [{"latest_status": s} for s in ("pass", "pass", "fail", "error", "unverified", "running", None)]
    assert counts_title(rows, 7) == "7: 2✓ 2✗ 1? 1◐"
    assert counts_title(rows, 3) == "3 of 7: 2✓ 2✗ 1? 1◐"
    assert counts_title([], 0) == ""


async def test_a_wide_terminal_shows_the_names_in_full_and_a_resize_fits_them_again(tmp_path: Path) -> None:
    from kerneltui.ui.widgets.problems import ProblemTable
    from tests.test_dashboard import wait_for

    longest = max(len(n) for n in NAMES)
    app = dashboard_of_problems(tmp_path, NAMES)
    async with app.run_test(size=(220, 40)) as pilot:
        problems = app.query_one("#problems", ProblemTable)
        await wait_for(lambda: len(problems.names) == len(NAMES), pilot)
        await wait_for(lambda: problems.columns_shown[0][2] == longest, pilot)
        assert problems.get_cell(NAMES[3], "name").plain == NAMES[3]
        await pilot.resize_terminal(160, 40)  # no room to spare: the narrow column again
        await wait_for(lambda: problems.columns_shown[0][2] == 10, pilot)
        await pilot.resize_terminal(190, 40)  # twenty columns to spare: the names grow by as many
        await wait_for(lambda: problems.columns_shown[0][2] == 30, pilot)
