"""What the judge takes from a worker's scratch folder (compiled kernels, their metadata) and what runs on those
bytes (nvdisasm, cuobjdump, ptxas): confined tools, capped collections, refusals that flag the version."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.containment.confined import ToolLimits, run_confined
from harness.containment.watch import probe
from harness.contract.protocol import Finished
from harness.contract.results import Evaluation, RungResult
from harness.judge import artifacts as dumps
from kerneltui.core.judging.client import record_event
from kerneltui.history.store import Store
from tests.conftest import add_version, judge_many, kerneltui, rung

SECRET = "kerneltui-judge-secret-4d1f"
# A stand-in for a tool with a planted exploit: it reports what it could reach.
SPY = """
import json, os, socket, sys
secret_file, outside, judge = sys.argv[1:4]
seen = {"env": dict(os.environ)}
for key, path in (("file", secret_file), ("judge_environ", f"/proc/{judge}/environ")):
    try:
        with open(path, "rb") as handle:
            seen[key] = handle.read().decode(errors="replace")
    except OSError as exc:
        seen[key] = f"refused: {exc}"
try:
    with open(outside, "w") as handle:
        handle.write("escaped")
    seen["wrote"] = True
except OSError:
    seen["wrote"] = False
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    seen["socket"] = True
except OSError:
    seen["socket"] = False
print(json.dumps(seen))
"""

CONTAINMENTS = [
    pytest.param(None, id="bubblewrap"),
    pytest.param(False, id="landlock"),
]


def skip_without(use_bwrap: bool | None) -> None:
    if use_bwrap is None and not probe().bwrap:
        pytest.skip("bubblewrap is not installed")
    if use_bwrap is False and probe().landlock_abi < 1:
        pytest.skip("Landlock is not available on this kernel")


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """A secret in the judge's environment and in a file of its home; the spy tool; where it must not write."""
    monkeypatch.setenv("KERNELTUI_TEST_SECRET", SECRET)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text(f"machine api password {SECRET}\n")
    tool = tmp_path / "tool.py"
    tool.write_text(SPY)
    return home / ".netrc", tool, tmp_path / "escaped"


def spy_argv(tool: Path, secret_file: Path, outside: Path) -> list[str]:
    return [os.path.realpath(sys.executable), "-S", str(tool), str(secret_file), str(outside), str(os.getpid())]


@pytest.mark.parametrize("use_bwrap", CONTAINMENTS)
def test_a_confined_tool_reaches_no_secret_writes_nothing_outside_and_opens_no_socket(
    planted: tuple[Path, Path, Path], use_bwrap: bool | None
) -> None:
    skip_without(use_bwrap)
    secret_file, tool, outside = planted
    argv = spy_argv(tool, secret_file, outside)
    unconfined = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert SECRET in unconfined.stdout and outside.exists()  # the spy sees what it should not, when let
    outside.unlink()
    done = run_confined(argv, [tool, sys.base_prefix], use_bwrap=use_bwrap)
    assert done.ok, (done.failure, done.output)
    seen = json.loads(done.output)
    assert SECRET not in done.output
    assert seen["file"].startswith("refused") and seen["judge_environ"].startswith("refused")
    assert not seen["wrote"] and not outside.exists()
    assert seen["socket"] is False


def test_the_dumps_disassembler_runs_confined(
    planted: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cubin crafted against nvdisasm would run with the judge's rights: here nvdisasm is a spy."""
    secret_file, tool, outside = planted
    script = tool.with_name("nvdisasm")
    python = "/usr/bin/python3"  # beneath /usr, which a confined tool may read, as it does its loader and libc
    if not os.access(python, os.X_OK):
        pytest.skip("no /usr/bin/python3 to stand in for nvdisasm")
    spy = f"{python} -S -c {shlex.quote(SPY)} {secret_file} {outside} {os.getpid()}"
    script.write_text(f"#!/bin/sh\nexec {spy}\n")
    script.chmod(0o755)
    monkeypatch.setenv("KERNELTUI_NVDISASM", str(script))
    monkeypatch.setattr(dumps, "LISTINGS", dumps.Listings())
    cubin = tool.with_name("k.cubin")
    cubin.write_bytes(b"\x7fELF planted")
    listing = dumps.disassemble(cubin)
    assert listing is not None, "the spy did not run"
    assert SECRET not in listing and not outside.exists()
    assert json.loads(listing)["wrote"] is False


@pytest.mark.parametrize("use_bwrap", CONTAINMENTS)
def test_a_tool_past_its_time_memory_or_output_is_stopped_and_says_so(tmp_path: Path, use_bwrap: bool | None) -> None:
    skip_without(use_bwrap)
    python = [os.path.realpath(sys.executable), "-S", "-c"]
    reads = [sys.base_prefix]
    slow = run_confined([*python, "import time; time.sleep(60)"], reads, ToolLimits(timeout_s=2), use_bwrap)
    assert not slow.ok and "ran past 2 s" in (slow.failure or "")
    hog = "x = bytearray(1 << 30); print('allocated')"
    greedy = run_confined([*python, hog], reads, ToolLimits(memory_bytes=256 << 20), use_bwrap)
    assert not greedy.ok and "allocated" not in greedy.output and "MemoryError" in greedy.output
    chatty = "import sys\nwhile True: sys.stdout.write('x' * 65536)"
    flood = run_confined([*python, chatty], reads, ToolLimits(output_bytes=1 << 20), use_bwrap)
    assert not flood.ok and "more than 1 MiB of output" in (flood.failure or "")
    assert len(flood.output) <= 1 << 20


def plant_kernel(cache: Path, group: str, name: str, cubin: bytes = b"\x7fELF", meta: str | None = None) -> None:
    folder = cache / group
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(meta if meta is not None else json.dumps({"name": name, "num_warps": 4}))
    (folder / f"{name}.cubin").write_bytes(cubin)


def test_three_hundred_planted_kernels_are_capped_and_refused(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    for index in range(300):
        plant_kernel(scratch / "triton", f"G{index:03d}", f"k{index}")
    collected = dumps.Collected(dumps.Caps(kernels=10))
    kernels = dumps.collect_triton(scratch, tmp_path / "into", collected=collected)
    assert len(kernels) == 10 and collected.kernels == 10
    assert len(list((tmp_path / "into").rglob("*.cubin"))) == 10  # the rest never copied
    assert any("more than 10 compiled kernels" in r for r in collected.refused)


def test_oversized_files_are_refused_and_a_versions_bytes_are_capped(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    plant_kernel(scratch / "triton", "A", "huge", cubin=b"\0" * (3 << 20))
    for index in range(5):
        plant_kernel(scratch / "triton", f"B{index}", f"mid{index}", cubin=b"\0" * (1 << 20))
    collected = dumps.Collected(dumps.Caps(file_bytes=2 << 20, version_bytes=3 << 20))
    kernels = dumps.collect_triton(scratch, tmp_path / "into", collected=collected)
    assert "huge" not in {k.name for k in kernels}
    assert len(kernels) == 3 and collected.held_bytes <= 3 << 20
    assert any("huge.cubin is 3145728 bytes (limit 2097152)" in r for r in collected.refused), collected.refused
    assert any("passed 3 MiB" in r for r in collected.refused), collected.refused


def test_deep_or_malformed_metadata_is_refused_not_a_judge_failure(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    plant_kernel(scratch / "triton", "A", "deep", meta="[" * 100_000 + "]" * 100_000)
    plant_kernel(scratch / "triton", "B", "broken", meta='{"name": "broken", ')
    plant_kernel(scratch / "triton", "C", "brackets_in_strings", meta=json.dumps({"name": "ok_kernel", "s": "[" * 99}))
    collected = dumps.Collected()
    kernels = dumps.collect_triton(scratch, tmp_path / "into", collected=collected)
    assert [k.name for k in kernels] == ["ok_kernel"]
    assert any("deeper than 32 levels" in r for r in collected.refused), collected.refused
    assert any("broken.json is not JSON" in r for r in collected.refused), collected.refused


def test_links_and_path_names_are_refused(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    plant_kernel(scratch / "triton", "A", "k", meta=json.dumps({"name": "../../problem"}))
    (scratch / "triton" / "B").mkdir()
    (scratch / "triton" / "B" / "k.json").write_text(json.dumps({"name": "k"}))
    (scratch / "triton" / "B" / "k.cubin").symlink_to("/etc/passwd")
    (scratch / "triton" / "C").symlink_to("/")
    collected = dumps.Collected()
    assert dumps.collect_triton(scratch, tmp_path / "into", collected=collected) == []
    text = " | ".join(collected.refused)
    assert "'../../problem', not an identifier" in text and "k.cubin is a link" in text, text
    assert "triton/C is a link or not a regular file" in text, text


def test_a_socket_in_the_cache_is_refused(tmp_path: Path) -> None:
    cache = tmp_path / "s" / "triton" / "A"
    cache.mkdir(parents=True)
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(cache / "k.cubin"))
        (cache / "k.json").write_text(json.dumps({"name": "k"}))
        collected = dumps.Collected()
        assert dumps.collect_triton(tmp_path / "s", tmp_path / "into", collected=collected) == []
    finally:
        listener.close()
    assert any("k.cubin" in r for r in collected.refused), collected.refused


@pytest.mark.slow
def test_a_version_flooding_its_cache_is_capped_and_flagged_with_what_was_refused(workspace: Path) -> None:
    """300 planted kernels took the dumps rung from 2 s to 225 s; a deep JSON read as "the judge failed"."""
    path = add_version(workspace, "floods_dumps", "v001.py")
    honest = add_version(workspace, "good", "v002.py")
    judged = judge_many(
        [path, honest], rungs=["load", "compile", "correctness", "dumps"], max_kernels=8, max_dump_file_mb=2
    )
    evaluation = judged["v001"]
    dumped = rung(evaluation, "dumps")
    assert dumped["ok"] is True, dumped
    kernels = dumped["metrics"]["kernels"]
    assert 1 <= len(kernels) <= 8, kernels
    assert not [k for k in kernels if k["dsl"] == "triton"], kernels  # neither planted nor its deepened own
    assert len(rung(evaluation, "compile")["metrics"]["kernels"]) <= 8
    flags = {f["name"]: f["reason"] for f in evaluation["flags"]}
    reason = flags.get("tampered", "")
    assert "more than 8 compiled kernels" in reason, flags
    assert "more than 8 entries in its Triton cache that no launch compiled" in reason, reason
    assert "add_kernel.json nests JSON deeper than 32 levels" in reason, reason
    assert "big.sm_90a.cubin is 3145732 bytes (limit 2097152)" in reason, reason
    assert not judged["v002"]["flags"], judged["v002"]["flags"]  # an honest version's cache is taken whole


# --- the workspace's dumps budget, `kerneltui gc` -------------------------------------------------------------


def judged_with_dumps(store: Store, state: Path, name: str, size: int, budget_mb: float | None = None) -> int:
    """An evaluation of vadd/<name> recorded as the judge reports it, its dumps `size` bytes on disk."""
    folder = state / "dumps" / "vadd" / name / hashlib.sha256(name.encode()).hexdigest()[:12]
    folder.mkdir(parents=True)
    cubin = folder / "add_kernel.cubin"
    cubin.write_bytes(b"\0" * size)
    store.ensure_problem("vadd", str(state.parent / "vadd"))
    version_id = store.ensure_version("vadd", name, state.parent / "vadd" / f"{name}.py", name)
    options = {"dumps_budget_mb": budget_mb} if budget_mb is not None else {}
    evaluation_id = store.start_evaluation(version_id, "vadd", name, name, options)
    files = [{"kernel": "add_kernel", "dsl": "triton", "kind": "cubin", "path": str(cubin), "bytes": size}]
    ev = Evaluation(problem="vadd", version=name, path=str(state.parent / "vadd" / f"{name}.py"), hash=name)
    ev.rungs.append(RungResult(name="dumps", ok=True, metrics={"dir": str(folder), "files": files}))
    ev.finish()
    record_event(store, evaluation_id, Finished(ev), 0)
    return evaluation_id


@pytest.fixture
def history(tmp_path: Path) -> Iterator[tuple[Store, Path]]:
    state = tmp_path / "ws" / ".kerneltui"
    state.mkdir(parents=True)
    opened = Store.open(state / "history.db")
    yield opened.store, state
    opened.store.close()


def test_past_the_budget_the_oldest_unapproved_dumps_go_first_and_show_as_pruned(history: tuple[Store, Path]) -> None:
    store, state = history
    mib = 1 << 20
    first = judged_with_dumps(store, state, "v001", mib)
    approved = judged_with_dumps(store, state, "v002", mib)
    row = store.evaluation(approved)
    assert row is not None
    store.add_verdict(row["version_id"], "approved", None, "person")
    third = judged_with_dumps(store, state, "v003", mib)
    assert not store.artifacts(first)[0]["pruned"]  # 3 MiB, within the default budget
    newest = judged_with_dumps(store, state, "v004", mib, budget_mb=2.5)  # over: two of four must go
    kept = {e: Path(store.artifacts(e)[0]["path"]).exists() for e in (first, approved, third, newest)}
    assert kept == {first: False, approved: True, third: False, newest: True}, kept
    assert store.artifacts(first)[0]["pruned"] and not store.artifacts(approved)[0]["pruned"]
    entries = {row["version"]: row["dumps"] for row in store.history("vadd")}
    assert entries == {"v001": "pruned", "v002": "kept", "v003": "pruned", "v004": "kept"}, entries


@pytest.mark.slow
def test_kerneltui_gc_dry_run_frees_nothing_then_gc_prunes_to_the_budget(history: tuple[Store, Path]) -> None:
    store, state = history
    ids = [judged_with_dumps(store, state, f"v00{i}", 1 << 20) for i in (1, 2, 3)]
    store.close()
    workspace = state.parent
    dry = kerneltui("gc", "--dry-run", "--budget-mb", "1.5", "--workspace", str(workspace))
    assert dry.returncode == 0, dry.stderr
    assert "would free 2.0 MiB in 2 folder(s)" in dry.stdout and "vadd v001" in dry.stdout, dry.stdout
    assert len(list((state / "dumps").rglob("*.cubin"))) == 3
    done = kerneltui("gc", "--budget-mb", "1.5", "--workspace", str(workspace))
    assert done.returncode == 0 and "freed 2.0 MiB in 2 folder(s)" in done.stdout, (done.stdout, done.stderr)
    assert [p.parent.parent.name for p in (state / "dumps").rglob("*.cubin")] == ["v003"]
    listed = kerneltui("history", "--workspace", str(workspace))
    pruned_lines = [line for line in listed.stdout.splitlines() if "✂" in line]
    assert [line.split()[1] for line in pruned_lines] == ["v002", "v001"], listed.stdout
    again = kerneltui("gc", "--workspace", str(workspace))  # the default budget: nothing more to free
    assert "freed 0.0 MiB in 0 folder(s)" in again.stdout, again.stdout
    assert ids


async def until(predicate: Callable[[], bool], pilot: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for the dashboard"
        await pilot.pause(0.05)


async def test_the_asm_pane_says_a_versions_dumps_were_pruned(tmp_path: Path) -> None:
    """Pruned dumps showed as an empty listing (their files gone): the pane says they were pruned."""
    from kerneltui.core.judging import dump_budget
    from kerneltui.ui.app import KernelTUI
    from kerneltui.ui.widgets.asm import AsmPane
    from kerneltui.ui.widgets.versions import VersionTable
    from tests import dashboard_fixtures

    workspace = dashboard_fixtures.build(tmp_path / "ws")
    opened = Store.open(workspace.db_path)
    freed = dump_budget.prune(opened.store, workspace.state / "dumps", 0)
    opened.store.close()
    assert "v002" in [f.folder.version for f in freed]
    assert not list((workspace.state / "dumps" / "vadd" / "v002").rglob("*.sass"))
    app = KernelTUI(workspace, run_scheduler=False)
    async with app.run_test(size=(160, 48)) as pilot:
        versions = app.query_one("#versions", VersionTable)
        await until(lambda: "v002" in versions.order, pilot)
        versions.move_cursor(row=versions.order.index("v002"))
        await pilot.press("4")
        asm = app.query_one("#asm-pane", AsmPane)
        await until(lambda: "were pruned" in asm.view.plain or "LDG" in asm.view.plain, pilot)
        assert "The dumps of v002 were pruned" in asm.view.plain, asm.view.plain


def test_tilelang_metadata_whose_counts_are_not_numbers_is_kept_to_numbers(tmp_path: Path) -> None:
    """A string for the shared memory a kernel asks for reached the compile rung's comparison with the limit."""
    folder = tmp_path / "s" / "tilelang"
    folder.mkdir(parents=True)
    (folder / "k-1.cu").write_text("__global__ void k_kernel() {}\n")
    (folder / "k-1.json").write_text(json.dumps({"name": "k", "shared": "lots", "num_warps": True}))
    (kernel,) = dumps.collect_tilelang(tmp_path / "s", tmp_path / "into")
    assert "shared" not in kernel.meta and "num_warps" not in kernel.meta


def test_triton_entries_no_launch_compiled_are_never_read_and_a_flood_of_them_is_refused(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    plant_kernel(scratch / "triton", "LAUNCHED", "add_kernel")
    for index in range(3):  # a few (what a precompile guessed, say): left out, said nothing of
        plant_kernel(scratch / "triton", f"G{index:03d}", "add_kernel", meta="[" * 100_000)
    few = dumps.Collected(dumps.Caps(kernels=10))
    kernels = dumps.collect_triton(scratch, tmp_path / "a", collected=few, only={"LAUNCHED"})
    assert [k.group for k in kernels] == ["LAUNCHED"] and few.refused == []  # the deep ones were never read
    for index in range(3, 300):
        plant_kernel(scratch / "triton", f"G{index:03d}", f"k{index}")
    flood = dumps.Collected(dumps.Caps(kernels=10))
    kernels = dumps.collect_triton(scratch, tmp_path / "b", collected=flood, only={"LAUNCHED"})
    assert [k.group for k in kernels] == ["LAUNCHED"]
    assert flood.refused == ["more than 10 entries in its Triton cache that no launch compiled"], flood.refused


def test_an_agent_reading_pruned_dumps_is_told_they_were_pruned(tmp_path: Path) -> None:
    import threading

    from agents.tools import Toolbox
    from kerneltui.core.agents.host import StoreHost, problem_info
    from kerneltui.core.judging import dump_budget
    from tests import dashboard_fixtures

    workspace = dashboard_fixtures.build(tmp_path / "ws")
    store = Store(workspace.db_path)
    try:
        dump_budget.prune(store, workspace.state / "dumps", 0)
        session = store.start_agent_session("vadd", "test", "test", os.getpid())
        info = problem_info(workspace, "vadd", tmp_path / "context")
        toolbox = Toolbox(StoreHost(workspace, info, store, session, None, threading.Event()), author="test")
        output, ok = toolbox.call("read_dump", {"version": "v002", "kind": "sass"})
    finally:
        store.close()
    assert not ok and "v002's dumps were pruned" in output, output


def test_a_cubin_that_hangs_the_disassembler_costs_its_listing_not_the_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each tool is stopped at its time limit, and a version's tools share one deadline: a crafted cubin per
    kernel must not make the rung wait a tool timeout per kernel."""
    hang = tmp_path / "hang"
    hang.write_text("#!/bin/sh\nexec sleep 600\n")
    hang.chmod(0o755)
    monkeypatch.setenv("KERNELTUI_NVDISASM", str(hang))
    monkeypatch.setenv("KERNELTUI_CUOBJDUMP", str(hang))
    monkeypatch.setattr(dumps, "LISTINGS", dumps.Listings())
    cubins = [tmp_path / f"k{i}.cubin" for i in range(3)]
    for index, cubin in enumerate(cubins):
        cubin.write_bytes(b"\x7fELF %d" % index)
    clock = dumps.ToolClock(seconds=2)
    listings = [dumps.disassemble_noting(cubin, clock) for cubin in cubins]
    assert all(sass is None for sass, _ in listings)
    assert "hang ran past" in (listings[0][1] or ""), listings[0]
    assert all("not run: this version's kernels took its tools past 2 s" in (why or "") for _, why in listings[1:])


def test_a_planted_tree_of_folders_is_not_walked_whole(tmp_path: Path) -> None:
    from harness.wire import scratch

    for outer in range(20):
        for inner in range(20):
            folder = tmp_path / "cute" / f"d{outer:02d}" / f"e{inner:02d}"
            folder.mkdir(parents=True)
            (folder / "k.cubin").write_bytes(b"x")
    assert len(scratch.walk_files(tmp_path, "cute")) == 400
    assert 0 < len(scratch.walk_files(tmp_path, "cute", limit=100)) < 100


def test_a_refusal_names_a_planted_file_without_its_control_characters(tmp_path: Path) -> None:
    cache = tmp_path / "s" / "triton" / "A"
    cache.mkdir(parents=True)
    (cache / "k.json").write_text(json.dumps({"name": "k"}))
    (cache / "k\x1b]52;c;cGF5bG9hZA==\x07.cubin").symlink_to("/etc/passwd")
    (cache / "k.cubin").symlink_to("/etc/passwd")
    collected = dumps.Collected()
    dumps.collect_triton(tmp_path / "s", tmp_path / "into", collected=collected)
    text = " ".join(collected.refused)
    assert "\\x1b]52" in text and "\x1b" not in text and "\x07" not in text, text


@pytest.mark.slow
def test_kerneltui_gc_takes_its_budget_from_the_config(history: tuple[Store, Path], tmp_path: Path) -> None:
    store, state = history
    for name in ("v001", "v002"):
        judged_with_dumps(store, state, name, 1 << 20)
    store.close()
    config = tmp_path / "config.toml"
    config.write_text("[ladder]\ndumps_budget_mb = 1.5\n")
    done = kerneltui("gc", "--config", str(config), "--workspace", str(state.parent))
    assert done.returncode == 0 and "dumps budget 1.5 MiB" in done.stdout, (done.stdout, done.stderr)
    assert "vadd v001" in done.stdout and "freed 1.0 MiB in 1 folder(s)" in done.stdout, done.stdout
    config.write_text("[ladder]\ndumps_budget_mb = -1\n")
    bad = kerneltui("gc", "--config", str(config), "--workspace", str(state.parent))
    assert bad.returncode == 2 and "dumps_budget_mb" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def test_listings_begun_while_the_benchmark_times_are_the_ones_the_dumps_keep(tmp_path: Path) -> None:
    """On a GPU a version's kernels are disassembled while its benchmark times (nvdisasm, ~0.3 s a cubin, was the
    dumps rung's whole time after it): the dumps take those listings and run no tool for them again."""
    from concurrent.futures import Future, ThreadPoolExecutor

    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"not a cubin")
    kernel = dumps.Kernel(name="k", dsl="triton", files={"cubin": cubin})
    begun: Future[dumps.Listing] = Future()
    begun.set_result(("// k's SASS, disassembled ahead", None))
    dumps.write_dumps([kernel], tmp_path / "out", ahead={str(cubin): begun})
    assert (tmp_path / "out" / "k.sass").read_text() == "// k's SASS, disassembled ahead"
    with ThreadPoolExecutor(2) as pool:  # begun for real: the same listing (or the same reason there is none)
        ahead = dumps.listings_ahead([kernel], pool)
        assert ahead[str(cubin)].result() == dumps.disassemble_noting(cubin)
