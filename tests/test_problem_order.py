"""A hundred imported problems listed as people count: 1_, 2_, ... 10_, 100_ (sorted as text: 100_, 10_, 11_ ... 1_)."""

from __future__ import annotations

from pathlib import Path

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
