"""Time and % of roofline per version, one line per bench case (textual-plotext)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static
from textual_plotext import PlotextPlot

from kerneltui.ui.widgets.format import shown


def series(rows: list[dict[str, Any]], key: str) -> dict[str, tuple[list[int], list[float]]]:
    """line label -> (version numbers, values), versions in order: a line per bench case, and per GPU where
    versions were timed on more than one kind (their times are not one series)."""
    out: dict[str, tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
    several = len({row.get("device_name") for row in rows}) > 1
    for row in rows:
        value = row.get(key)
        if value is None or row.get("number") is None:
            continue
        label = f"{row['case_label']} · {row.get('device_name') or '?'}" if several else row["case_label"]
        xs, ys = out[label]
        xs.append(int(row["number"]))
        ys.append(float(value))
    return dict(out)


class TrendsPane(Vertical):
    DEFAULT_CSS = """
    TrendsPane PlotextPlot { height: 1fr; }
    TrendsPane #trends-empty { color: $text-muted; padding: 1 2; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="trends-empty")
        yield PlotextPlot(id="trend-time")
        yield PlotextPlot(id="trend-roofline")

    def show(
        self, problem: str | None, rows: list[dict[str, Any]], resources: list[dict[str, Any]] | None = None
    ) -> None:
        """Time and % of roofline; with no timings (no GPU), the kernels' registers and spills instead."""
        empty = self.query_one("#trends-empty", Static)
        times, roofs = series(rows, "median_us"), series(rows, "roofline_pct")
        used = series(resources or [], "value")
        has_data = bool(times) or bool(used)
        empty.display = not times
        for plot_id in ("#trend-time", "#trend-roofline"):
            self.query_one(plot_id, PlotextPlot).display = has_data
        if not times:
            empty.update(
                shown(
                    f"No timings for {problem or 'this problem'} yet: benchmarks run on a GPU."
                    + (" Meanwhile, what each version's kernels use:" if used else "")
                )
            )
        if times:
            self._draw("#trend-time", times, f"{problem} · median time per version (µs)", "µs")
            self._draw("#trend-roofline", roofs, f"{problem} · % of roofline per version", "%")
        elif used:
            registers = {k: v for k, v in used.items() if k.startswith("registers")}
            spills = {k: v for k, v in used.items() if k.startswith("bytes")}
            self._draw("#trend-time", registers, f"{problem} · registers per thread (largest kernel)", "regs")
            self._draw("#trend-roofline", spills, f"{problem} · bytes spilled per version", "B")

    def _draw(self, plot_id: str, data: dict[str, tuple[list[int], list[float]]], title: str, unit: str) -> None:
        widget = self.query_one(plot_id, PlotextPlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(shown(title, limit=120).plain)
        versions = sorted({x for xs, _ in data.values() for x in xs})
        for label, (xs, ys) in data.items():
            plt.plot(xs, ys, label=shown(label, limit=40).plain, marker="braille")
            plt.scatter(xs, ys, marker="●")
        if versions:
            plt.xticks([float(v) for v in versions], [f"v{v:03d}" for v in versions])
        plt.ylabel(unit)
        widget.refresh()
