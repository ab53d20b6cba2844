"""How fast the dashboard is on a big history, and what it adds to the ladder's own time.

    python benchmarks/dashboard.py [--versions 10000] [--problems 50] [--dir /tmp/kerneltui-bench]

1. Fills a workspace and its history with N versions over P problems (files on disk, evaluations
   with rungs, per-case results and timings), as a long agent session leaves them.
2. Start-up: starts `kerneltui WORKSPACE` in a real terminal (tmux, 160x48) and times until the
   first problem's newest version is on screen; repeated, median reported.
3. Keypress: in the real app (Textual's Pilot, headless), times `j` until the versions table has
   redrawn, and until the Rungs pane shows the newly selected version.
4. Write to screen: in a small workspace with the real judge, writes a version file and times until
   its correctness result is on screen; subtracts the ladder's own time (the rungs' seconds) to get
   what kerneltui adds (debounce, queue, database, redraw).
5. Memory: `kerneltui WORKSPACE` in tmux on a one-version workspace, its whole process tree (dashboard,
   judge, workers) summed, RSS and PSS: once the version is judged (spares ready), and idle, once the
   judge has ended its spares (spare_idle_s); beside it the same wait with spares kept (spare_idle_s = 0).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kerneltui.history.store import Store, now  # noqa: E402

PROBLEM = (REPO / "tests" / "fixtures" / "vadd" / "problem.py").read_text()
VERSION = (REPO / "tests" / "fixtures" / "versions" / "good.py").read_text()


def fill(root: Path, versions: int, problems: int) -> None:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    store = Store.open(root / ".kerneltui" / "history.db").store
    per_problem = versions // problems
    stamp = now()
    evaluation_id = 0
    with store.transaction():
        for p in range(problems):
            name = f"problem{p:02d}"
            folder = root / name
            folder.mkdir()
            (folder / "problem.py").write_text(PROBLEM)
            store.ensure_problem(name, str(folder), "fp32 vector add")
            version_rows, evaluation_rows, rung_rows, timing_rows = [], [], [], []
            for v in range(1, per_problem + 1):
                text = VERSION.replace("BLOCK 1024.", f"BLOCK 1024, attempt {v}.")
                path = folder / f"v{v:03d}.py"
                path.write_text(text)
                digest = hashlib.sha256(text.encode()).hexdigest()
                version_id = len(version_rows) + 1 + p * per_problem
                evaluation_id += 1
                passed = v % 4 != 0
                median = 100.0 / (1 + v / 50) if passed else None
                version_rows.append(
                    {
                        "id": version_id,
                        "problem": name,
                        "name": f"v{v:03d}",
                        "number": v,
                        "path": str(path),
                        "hash": digest,
                        "size": len(text),
                        "notes": f"attempt {v}",
                        "author": "bench",
                        "created": stamp,
                        "source": text,
                    }
                )
                evaluation_rows.append(
                    {
                        "id": evaluation_id,
                        "version_id": version_id,
                        "problem": name,
                        "version": f"v{v:03d}",
                        "hash": digest,
                        "status": "pass" if passed else "fail",
                        "ok": int(passed),
                        "failed_rung": None if passed else "correctness",
                        "device_name": "NVIDIA H200",
                        "queued": stamp,
                        "started": stamp,
                        "finished": stamp,
                        "seconds": 3.0,
                        "max_abs": 0.0 if passed else 1.5,
                        "median_us": median,
                        "speedup": 2.0 if passed else None,
                        "roofline_pct": 50 + v / 10 if passed else None,
                    }
                )
                for idx, rung in enumerate(("load", "compile", "correctness", "benchmark", "roofline", "dumps")):
                    ok = passed or idx < 2
                    rung_rows.append(
                        {
                            "evaluation_id": evaluation_id,
                            "idx": idx,
                            "name": rung,
                            "ok": int(ok),
                            "seconds": 0.5,
                            "metrics": json.dumps({}),
                            "err": None if ok else "case n=4097: outside atol",
                        }
                    )
                if passed:
                    timing_rows.append(
                        {
                            "evaluation_id": evaluation_id,
                            "case_label": "n=16777216",
                            "median_us": median,
                            "roofline_pct": 50 + v / 10,
                            "noise_pct": 0.3,
                        }
                    )
            store.table("versions").insert_all(version_rows)
            store.table("evaluations").insert_all(evaluation_rows)
            store.table("rungs").insert_all(rung_rows)
            store.table("timings").insert_all(timing_rows)
    store.close()


def tmux_start_time(root: Path, first_visible: str, repeats: int) -> list[float]:
    if not shutil.which("tmux"):
        return []
    times = []
    kerneltui = Path(sys.executable).with_name("kerneltui")
    for i in range(repeats):
        session = f"kerneltui-bench-{i}"
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
        start = time.perf_counter()
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "48", f"{kerneltui} {root} --no-judge"],
            check=True,
        )
        while True:
            capture = ["tmux", "capture-pane", "-t", session, "-p"]
            screen = subprocess.run(capture, capture_output=True, text=True).stdout
            if first_visible in screen:
                times.append(time.perf_counter() - start)
                break
            if time.perf_counter() - start > 30:
                raise RuntimeError(f"the dashboard did not show {first_visible!r}:\n{screen}")
            time.sleep(0.01)
        subprocess.run(["tmux", "send-keys", "-t", session, "q"])
        time.sleep(0.5)
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    return times


async def keypress_times(root: Path, presses: int) -> tuple[list[float], list[float]]:
    """Per press of j: time to the first frame written after it (the cursor moved), and to the first
    frame after the Rungs pane holds the newly selected version."""
    from textual.screen import Screen

    from kerneltui.core.workspace import Workspace
    from kerneltui.ui.app import KernelTUI
    from kerneltui.ui.widgets.rungs import RungsPane
    from kerneltui.ui.widgets.versions import VersionTable

    app = KernelTUI(Workspace(root), run_scheduler=False)
    redraw, detail = [], []
    async with app.run_test(size=(160, 48)) as pilot:
        frames: list[float] = []
        compose_frame = Screen._compositor_refresh

        def frame_done(screen: Screen[object]) -> None:  # a frame composed (and, on a terminal, written)
            compose_frame(screen)
            frames.append(time.perf_counter())

        Screen._compositor_refresh = frame_done  # type: ignore[method-assign]
        table = app.query_one("#versions", VersionTable)
        rungs = app.query_one("#rungs-view", RungsPane)
        changed: list[float] = []
        set_lines = rungs.set_lines

        def noted(*args: Any, **kwargs: Any) -> None:
            set_lines(*args, **kwargs)
            changed.append(time.perf_counter())

        rungs.set_lines = noted  # type: ignore[method-assign]
        while len(table.order) < 10:
            await pilot.pause(0.05)
        await pilot.pause(1.0)
        for _ in range(presses):
            target = table.order[min(table.cursor_row + 1, len(table.order) - 1)]
            start = time.perf_counter()
            await pilot.press("j")
            while not any(f > start for f in frames) and time.perf_counter() - start < 5:
                await pilot.pause(0.001)
            redraw.append(min(f for f in frames if f > start) - start)
            while not rungs.plain.startswith(target):
                await pilot.pause(0.001)
            shown = changed[-1]
            while not any(f > shown for f in frames) and time.perf_counter() - shown < 5:
                await pilot.pause(0.001)
            detail.append(min(f for f in frames if f > shown) - start)
            await pilot.pause(0.05)
    return redraw, detail


async def write_to_screen(root: Path, repeats: int) -> list[dict[str, float]]:
    from kerneltui.core.workspace import Workspace
    from kerneltui.ui.app import KernelTUI
    from kerneltui.ui.widgets.versions import VersionTable

    if root.exists():
        shutil.rmtree(root)
    folder = root / "vadd"
    folder.mkdir(parents=True)
    (folder / "problem.py").write_text(PROBLEM)
    app = KernelTUI(Workspace(root))
    results = []
    async with app.run_test(size=(160, 48)) as pilot:
        while app.device is None:
            await pilot.pause(0.05)
        await pilot.pause(2.0)  # let the judge's spare workers finish importing
        for i in range(repeats):
            name = f"v{i + 1:03d}"
            start = time.perf_counter()
            (folder / f"{name}.py").write_text(VERSION.replace("BLOCK 1024.", f"BLOCK 1024, run {i}."))
            table = app.query_one("#versions", VersionTable)
            while True:
                row = table.rows_by_key.get(name)
                judged = ("correctness", "benchmark", "roofline", "dumps")
                if row and (row.get("last_rung") in judged or row.get("status") in ("pass", "fail", "unverified")):
                    break
                await pilot.pause(0.005)
            on_screen = time.perf_counter() - start
            with app.session.reading("detail") as store:
                assert store is not None, "the dashboard's history reader is not open"
                rows = store.rows(
                    "SELECT name, seconds FROM rungs WHERE evaluation_id = ? ORDER BY idx", [row["evaluation_id"]]
                )
            ladder = sum(r["seconds"] or 0 for r in rows if r["name"] in ("load", "compile", "correctness"))
            results.append({"on_screen_s": on_screen, "ladder_s": ladder, "added_s": on_screen - ladder})
            while row.get("status") not in ("pass", "fail", "unverified"):
                await pilot.pause(0.05)
                row = table.rows_by_key[name]
            await pilot.pause(1.5)
    return results


def tree_memory_mb(root_pid: int) -> dict[str, float]:
    """RSS and PSS (MiB) summed over a process and all its descendants, and how many workers among them: processes
    forked from a worker template (a harness.worker process whose parent is one too; the template itself is not)."""
    parents: dict[int, int] = {}
    commands: dict[int, bytes] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                commands[int(entry.name)] = (entry / "cmdline").read_bytes()
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = {root_pid}, {root_pid}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - tree
        tree |= frontier
    total = {"rss": 0.0, "pss": 0.0, "workers": 0}
    for pid in tree:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in rollup.splitlines():
            key, _, value = line.partition(":")
            if key in ("Rss", "Pss"):
                total[key.lower()] += int(value.split()[0]) / 1024
        mine, parents_command = commands.get(pid, b""), commands.get(parents.get(pid, 0), b"")
        total["workers"] += b"harness.worker" in mine and b"harness.worker" in parents_command
    return total


def memory(root: Path, idle_s: float) -> dict[str, dict[str, float]]:
    """The dashboard's process tree once its one version is judged, and again once it has been idle."""
    if root.exists():
        shutil.rmtree(root)
    folder = root / "vadd"
    folder.mkdir(parents=True)
    (folder / "problem.py").write_text(PROBLEM)
    (folder / "v001.py").write_text(VERSION)
    config = root.parent / f"config-{root.name}.toml"
    config.write_text(f"[ladder]\nspare_idle_s = {idle_s}\nrungs = ['load', 'compile', 'correctness']\n")
    session = f"kerneltui-mem-{root.name}"
    kerneltui = Path(sys.executable).with_name("kerneltui")
    subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    command = f"KERNELTUI_CONFIG={config} {kerneltui} {root}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "48", command], check=True)
    try:
        pane = int(
            subprocess.run(
                ["tmux", "list-panes", "-t", session, "-F", "#{pane_pid}"], capture_output=True, text=True, check=True
            ).stdout.split()[0]
        )
        wait_for(lambda: judged(root), 300, "the version to be judged")
        wait_for(lambda: tree_memory_mb(pane)["workers"] > 0, 120, "spare workers")
        busy = tree_memory_mb(pane)
        if idle_s > 0:
            wait_for(lambda: tree_memory_mb(pane)["workers"] == 0, idle_s + 120, "the spares to end")
        else:
            time.sleep(30)  # as long as the other run waits, give or take: nothing is meant to change
        return {"busy": busy, "idle": tree_memory_mb(pane)}
    finally:
        subprocess.run(["tmux", "send-keys", "-t", session, "q"])
        time.sleep(1)
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def judged(root: Path) -> bool:
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(root / ".kerneltui" / "history.db")) as db:
            return bool(db.execute("SELECT count(*) FROM evaluations WHERE finished IS NOT NULL").fetchone()[0])
    except sqlite3.Error:
        return False


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {what}")
        time.sleep(0.5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", type=int, default=10_000)
    parser.add_argument("--problems", type=int, default=50)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kerneltui-bench"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--idle-s", type=float, default=10.0, help="spare_idle_s for the memory step")
    parser.add_argument("--memory-only", action="store_true", help="only step 5")
    args = parser.parse_args()
    if args.memory_only:
        return memory_step(args)
    big = args.dir / "big"
    start = time.perf_counter()
    fill(big, args.versions, args.problems)
    print(
        f"filled {args.versions} versions over {args.problems} problems in {time.perf_counter() - start:.1f} s "
        f"({(big / '.kerneltui' / 'history.db').stat().st_size / 2**20:.1f} MiB history)"
    )
    newest = f"v{args.versions // args.problems:03d}"
    starts = tmux_start_time(big, newest, args.repeats)
    if starts:
        print(
            f"start-up to first screen (tmux, 160x48): median {statistics.median(starts):.2f} s, "
            f"max {max(starts):.2f} s over {len(starts)} starts"
        )
    redraw, detail = asyncio.run(keypress_times(big, 40))
    print(
        f"keypress j to the first frame (cursor moved): median {1000 * statistics.median(redraw):.1f} ms, "
        f"p90 {1000 * sorted(redraw)[int(0.9 * len(redraw))]:.1f} ms"
    )
    p90 = sorted(detail)[int(0.9 * len(detail))]
    print(
        f"keypress j to the frame with the Rungs pane showing that version: "
        f"median {1000 * statistics.median(detail):.1f} ms, p90 {1000 * p90:.1f} ms"
    )
    results = asyncio.run(write_to_screen(args.dir / "small", args.repeats))
    for r in results:
        print(
            f"write to correctness on screen {r['on_screen_s']:.2f} s = ladder {r['ladder_s']:.2f} s "
            f"+ kerneltui {r['added_s']:.2f} s"
        )
    added = [r["added_s"] for r in results]
    print(f"kerneltui adds: median {statistics.median(added):.2f} s, max {max(added):.2f} s")
    return memory_step(args)


def memory_step(args: argparse.Namespace) -> int:
    if shutil.which("tmux"):
        for label, idle_s in (
            ("spares kept (spare_idle_s = 0)", 0.0),
            (f"spare_idle_s = {args.idle_s:g}", args.idle_s),
        ):
            found = memory(args.dir / f"mem{int(idle_s)}", idle_s)
            print(
                f"memory, {label}: "
                + ", ".join(
                    f"{when} {m['rss']:.0f} MiB RSS / {m['pss']:.0f} MiB PSS ({m['workers']:.0f} worker processes)"
                    for when, m in found.items()
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
