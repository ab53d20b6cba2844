"""At 80x24 with no GPU the versions table kept `median` (always "·") and dropped the verdict, the max error and
the note: where no row has a timing, the columns that carry information win the width."""

from __future__ import annotations

from kerneltui.ui.widgets.versions import COLUMNS, visible_columns


def shown(width: int, timed: bool) -> list[str]:
    indices, _ = visible_columns(width, 1, timed)
    return [COLUMNS[i][0] for i in indices]


def test_with_no_timing_the_verdict_the_error_and_the_note_come_before_the_timing_columns() -> None:
    untimed = shown(50, timed=False)  # about the versions pane's width in an 80-column terminal
    assert "err" in untimed and "median" not in untimed, untimed
    timed = shown(50, timed=True)
    assert "median" in timed and "err" not in timed, timed
    wider = shown(76, timed=False)
    assert {"err", "verdict", "note"} <= set(wider) and "median" not in wider, wider


def test_a_wide_table_shows_every_column_either_way() -> None:
    assert shown(200, timed=False) == shown(200, timed=True) == [key for key, _, _ in COLUMNS]
