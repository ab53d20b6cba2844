"""The context search index on real files and real SQLite: chunks, identifiers, ranking, hostile queries,
incremental refresh, installed packages, the CLI and the agents' search_context."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import threading
from pathlib import Path

import pytest

from agents import context_index
from agents.context_index import MAX_BYTES, ContextIndex, Hit, fts_query, query_terms
from agents.tools import Toolbox
from kerneltui.cli import context as context_cli
from kerneltui.core.agents.host import StoreHost, problem_info
from kerneltui.core.workspace import Workspace
from kerneltui.history.store import Store
from tests.conftest import make_workspace

PYTHON = '''"""Copies and MMAs."""
import cutlass.cute as cute

TILE = 128


def make_tiled_copy(atom, layout):
    """Tiles a copy atom over threads."""
    return cute.make_tiled_copy(atom, layout)


class TiledMma:
    """An MMA atom tiled over warps."""

    def partition(self, tensor):
        return tensor


def kernel(a, b):
    acc = tl.dot(a, b)
    return acc
'''
MARKDOWN = """# Hopper

Notes on Hopper tensor cores.

## wgmma

A warpgroup issues wgmma.mma_async on shared memory descriptors.

## TMA

cp.async.bulk moves tiles between global and shared memory.
"""


def header(lines: int = 200) -> str:
    body = [f"// line {i}" for i in range(1, lines + 1)]
    body[129] = "__device__ void wgmma_fence();  // shared memory fence"
    return "\n".join(body) + "\n"


@pytest.fixture
def context(tmp_path: Path) -> Path:
    root = tmp_path / "context"
    (root / "cute").mkdir(parents=True)
    (root / "cute" / "copy.py").write_text(PYTHON)
    (root / "hopper.md").write_text(MARKDOWN)
    (root / "wgmma.cuh").write_text(header())
    (root / "blob.bin.txt").write_bytes(b"wgmma\x00\x01\x02" * 100)
    (root / "huge.txt").write_text("wgmma " * (MAX_BYTES // 6 + 10))
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "copy.txt").write_text("wgmma in a cache folder")
    return root


@pytest.fixture
def index(tmp_path: Path, context: Path) -> ContextIndex:
    made = ContextIndex(tmp_path / "cache" / "index.sqlite", context)
    made.refresh()
    return made


def top(index: ContextIndex, query: str) -> Hit:
    hits = index.search(query)
    assert hits, query
    return hits[0]


def test_files_are_chunked_and_skipped_with_reasons(tmp_path: Path, context: Path) -> None:
    stats = ContextIndex(tmp_path / "i.sqlite", context).refresh()
    assert stats.files == 3 and stats.rechunked == 5
    assert stats.skipped["binary"] == 1 and stats.skipped["too large"] == 1 and stats.skipped["folders skipped"] == 1
    assert not (context / "i.sqlite").exists() and (tmp_path / "i.sqlite").is_file()  # the context is left alone


def test_identifiers_are_found_with_their_line_ranges(index: ContextIndex) -> None:
    hit = top(index, "make_tiled_copy")
    assert (hit.where, hit.name) == ("cute/copy.py:7-9", "make_tiled_copy")
    assert (hit.lines[0][0], hit.lines[1][0]) == (7, 9)  # the def, and cute.make_tiled_copy inside it
    hit = top(index, "TiledMma")
    assert (hit.where, hit.name) == ("cute/copy.py:12-16", "TiledMma")
    assert top(index, "tl.dot").where == "cute/copy.py:19-21"
    hit = top(index, "wgmma.mma_async")
    assert (hit.where, hit.name) == ("hopper.md:5-8", "wgmma")
    assert top(index, "wgmma_fence").where == "wgmma.cuh:101-160"  # windows of 60 lines: 1-60, 51-110, 101-160
    assert top(index, "TILE").where == "cute/copy.py:1-4"  # module code between the definitions
    assert top(index, "tiled mma").name == "TiledMma"  # the words inside an identifier find it too
    assert index.search("dot.tl") == [] and index.search("huge") == []


def test_chunks_holding_more_of_the_words_come_first(index: ContextIndex) -> None:
    hits = index.search("wgmma shared memory")
    assert [h.matched for h in hits] == sorted((h.matched for h in hits), reverse=True)
    assert {h.where for h in hits if h.matched == 3} == {"hopper.md:5-8", "wgmma.cuh:101-160"}
    assert {h.where for h in hits if h.matched == 2} == {"hopper.md:9-11"}  # shared memory, no wgmma
    assert top(index, "tiles global memory").where == "hopper.md:9-11"


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "'",
        "(",
        ")",
        "wgmma)",
        '"wgmma',
        "NEAR(a b)",
        "a NEAR b",
        "*",
        "wg*",
        "AND",
        "a AND OR NOT b",
        "^tile",
        "col:wgmma",
        "path:x",
        "{a b}",
        "tl.dot(",
        "ünïcödé 共有メモリ",
        "\x00",
        "-",
        "+x",
        "",
        "  ",
        "a" * 5000,
    ],
)
def test_hostile_queries_never_raise(index: ContextIndex, query: str) -> None:
    assert isinstance(index.search(query), list)
    assert fts_query(query_terms(query), "AND").count('"') % 2 == 0


def test_refresh_rechunks_only_changed_files_and_drops_deleted_ones(tmp_path: Path, context: Path) -> None:
    index = ContextIndex(tmp_path / "i.sqlite", context)
    first = index.refresh()
    again = index.refresh()
    assert (again.rechunked, again.removed, again.chunks, again.files) == (0, 0, first.chunks, first.files)
    (context / "hopper.md").write_text(MARKDOWN + "\n## Clusters\n\nDistributed shared memory across a cluster.\n")
    (context / "wgmma.cuh").unlink()
    changed = index.refresh()
    assert (changed.rechunked, changed.removed, changed.files) == (1, 1, 2)
    assert top(index, "distributed cluster").where == "hopper.md:13-15"
    assert not [h for h in index.search("wgmma_fence")]
    assert top(index, "make_tiled_copy").where == "cute/copy.py:7-9"  # untouched files keep their rows


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package named tilelang on sys.path (a real folder of sources, found by importlib)."""
    package = tmp_path / "installed" / "tilelang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "language.py").write_text("def gemm(A, B, C):\n    '''T.gemm: C += A @ B on tiles.'''\n")
    (tmp_path / "installed" / "secret.txt").write_text("the API key")
    monkeypatch.syspath_prepend(str(package.parent))
    importlib.invalidate_caches()
    return package


@pytest.mark.slow
def test_a_new_index_holds_the_installed_dsls_and_finds_their_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a fresh install, with nothing fetched: the installed triton and CuTeDSL answer the words agents search."""
    monkeypatch.setattr(context_index, "NEW_INDEX_PACKAGES", context_index.PACKAGES)
    empty = tmp_path / "context"
    empty.mkdir()
    index = ContextIndex(tmp_path / "i.sqlite", empty)
    index.refresh()
    expected = {"tl.dot": "site/triton/", "make_tiled_copy": "site/cutlass/", "TiledMma": "site/cutlass/"}
    expected["wgmma"] = "site/"
    if importlib.util.find_spec("tilelang"):  # an optional extra
        expected["T.gemm"] = "site/tilelang/"
    for word, where in expected.items():
        hits = index.search(word)
        assert hits and hits[0].where.startswith(where), (word, [h.where for h in hits[:3]])
    again = index.refresh()
    assert again.rechunked == 0 and again.files == index.refresh().files > 100


def test_a_definition_in_the_aliased_package_outranks_mentions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """T.gemm: TileLang's `def gemm` (whose text never says T.gemm) first, before notes that mention T.gemm and
    another backend's gemm; a name alone ranks the definition before the mentions too."""
    package = tmp_path / "installed" / "tilelang"
    for folder in (package / "language", package / "rocm"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        (folder / "gemm_op.py").write_text("def gemm(A, B, C):\n    return _emit(A, B, C)\n")
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(package.parent))
    importlib.invalidate_caches()
    notes = tmp_path / "context"
    notes.mkdir()
    (notes / "tiles.md").write_text("# Tiles\n\nT.gemm on tiles: T.gemm(A_shared, B_shared, C_local) and gemm.\n")
    index = ContextIndex(tmp_path / "i.sqlite", notes, packages=("tilelang",))
    index.refresh()
    assert [h.where for h in index.search("T.gemm")] == [
        "site/tilelang/language/gemm_op.py:1-2",
        "tiles.md:1-3",
        "site/tilelang/rocm/gemm_op.py:1-2",  # only the name: last
    ]
    assert index.search("gemm")[0].path.endswith("gemm_op.py")
    (package / "language" / "copy_op.py").write_text("# T.copy moves a tile: global to shared\n")
    (notes / "copies.md").write_text("# Copies\n\nT.copy moves a tile from global to shared memory.\n")
    index.refresh()
    assert [h.path for h in index.search("tile global shared")][:2] == [
        "copies.md",
        "site/tilelang/language/copy_op.py",
    ]


def test_installed_packages_are_indexed_under_site(tmp_path: Path, context: Path, installed: Path) -> None:
    index = ContextIndex(tmp_path / "i.sqlite", context, packages=("tilelang",))
    index.refresh()
    assert top(index, "T.gemm").where == "site/tilelang/language.py:1-2"
    assert index.package_file("site/tilelang/language.py") == (installed / "language.py").resolve()
    for path in ("site/tilelang/../secret.txt", "site/tilelang/missing.py", "site/os/path.py", "language.py"):
        assert index.package_file(path) is None, path
    assert ContextIndex(tmp_path / "i.sqlite", context).refresh().files == 4  # later refreshes keep the packages


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    context_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    code = args.func(args)
    return code, capsys.readouterr().out


def test_the_cli_indexes_and_prints_hits(tmp_path: Path, context: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = ["--workspace", str(tmp_path), "--context", str(context)]
    code, out = run_cli(["context", "index", *workspace], capsys)
    assert code == 0 and "3 files indexed" in out and "1 binary" in out and "1 too large" in out
    assert (tmp_path / ".kerneltui" / "context-index.sqlite").is_file()
    code, out = run_cli(["context", "search", "TiledMma", *workspace], capsys)
    assert code == 0 and out.startswith("cute/copy.py:12-16  TiledMma") and "cute/copy.py:12: class TiledMma" in out
    code, out = run_cli(["context", "search", "wgmma", "--json", "--limit", "2", *workspace], capsys)
    hits = json.loads(out)
    assert code == 0 and len(hits) == 2 and {"path", "start", "end", "lines"} <= set(hits[0])
    code, out = run_cli(["context", "search", "nothing_like_this", *workspace], capsys)
    assert code == 1 and "nothing in the context matches" in out


def test_the_agents_search_context_uses_the_index(tmp_path: Path, context: Path, installed: Path) -> None:
    workspace = Workspace(make_workspace(tmp_path / "ws").parent)
    store = Store(workspace.db_path)
    session = store.start_agent_session("vadd", "test", "test", os.getpid())
    host = StoreHost(workspace, problem_info(workspace, "vadd", context), store, session, None, threading.Event())
    toolbox = Toolbox(host, author="test")
    output, ok = toolbox.call("search_context", {"query": "make_tiled_copy"})
    assert ok and output.startswith("cute/copy.py:7-9  make_tiled_copy  (1 of 1 words)"), output
    assert "cute/copy.py:9: return cute.make_tiled_copy(atom, layout)" in output
    assert (workspace.state / "context-index.sqlite").is_file()
    read, ok = toolbox.call("read_file", {"path": "cute/copy.py", "offset": 7})
    assert ok and read.split("\n")[0].endswith("def make_tiled_copy(atom, layout):")
    output, ok = toolbox.call("search_context", {"query": 'NEAR("wgmma" *'})
    assert ok and "hopper.md:5-8" in output
    output, ok = toolbox.call("read_file", {"path": "site/tilelang/language.py"})  # not indexed yet: refused
    assert not ok and "no such file" in output
    ContextIndex(workspace.state / "context-index.sqlite", context, packages=("tilelang",)).refresh()  # as the CLI
    output, ok = toolbox.call("read_file", {"path": "site/tilelang/language.py"})
    assert ok and "T.gemm" in output
    for path in ("site/tilelang/../secret.txt", "site/tilelang/__init__.py", str(installed / "language.py")):
        output, ok = toolbox.call("read_file", {"path": path})
        assert not ok and "the API key" not in output, path
    store.close()


def test_fetch_clones_a_repository_into_the_context_and_indexes_it(
    tmp_path: Path, context: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kerneltui context fetch cutlass` makes a shallow clone: here of a local repository, no network."""
    import subprocess

    from kerneltui.core.workspace import WorkspaceError

    repo = tmp_path / "upstream" / "cute-examples.git"
    (repo / "examples").mkdir(parents=True)
    (repo / "examples" / "gemm.py").write_text("def hopper_wgmma_gemm(a, b):\n    return a @ b\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    for step in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "examples"]):
        subprocess.run([*git, *step], cwd=repo, check=True)
    workspace = ["--workspace", str(tmp_path), "--context", str(context)]
    code, out = run_cli(["context", "fetch", f"file://{repo}", *workspace], capsys)
    assert code == 0 and (context / "cute-examples" / "examples" / "gemm.py").is_file(), out
    code, out = run_cli(["context", "search", "hopper_wgmma_gemm", *workspace], capsys)
    assert code == 0 and out.startswith("cute-examples/examples/gemm.py:1-2"), out
    with pytest.raises(WorkspaceError, match="exists already"):
        run_cli(["context", "fetch", f"file://{repo}", *workspace], capsys)
    with pytest.raises(WorkspaceError, match="failed"):
        run_cli(["context", "fetch", str(tmp_path / "no-such-repo"), "--name", "gone", *workspace], capsys)
    assert not (context / "gone").exists()


def test_add_copies_a_local_folder_into_the_context_and_indexes_it(
    tmp_path: Path, context: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kerneltui.core.workspace import WorkspaceError

    docs = tmp_path / "ptx-docs"
    (docs / ".git").mkdir(parents=True)
    (docs / ".git" / "config").write_text("[core]\n")
    (docs / "mbarrier.md").write_text("# mbarrier.try_wait\n\nWaits on the phase of an mbarrier.\n")
    workspace = ["--workspace", str(tmp_path), "--context", str(context)]
    code, out = run_cli(["context", "add", str(docs), *workspace], capsys)
    assert (
        code == 0 and (context / "ptx-docs" / "mbarrier.md").is_file() and not (context / "ptx-docs" / ".git").exists()
    )
    code, out = run_cli(["context", "search", "mbarrier.try_wait", *workspace], capsys)
    assert code == 0 and out.startswith("ptx-docs/mbarrier.md:1-3"), out
    with pytest.raises(WorkspaceError, match="exists already"):
        run_cli(["context", "add", str(docs), *workspace], capsys)
    with pytest.raises(WorkspaceError, match="holds the context folder"):
        run_cli(["context", "add", str(context.parent), "--name", "all", *workspace], capsys)


async def test_the_agent_pane_shows_what_the_agent_searched_and_read(tmp_path: Path, context: Path) -> None:
    """Each search names its hits (path:lines and definition) and each read its line range, not 'N lines'."""
    from kerneltui.core.judging import runner
    from kerneltui.ui.app import KernelTUI
    from tests.conftest import add_version
    from tests.test_dashboard import SIZE, wait_for

    folder = make_workspace(tmp_path / "ws")
    workspace = Workspace(folder.parent)
    store = Store(workspace.db_path)
    runner.record_version(store, workspace, add_version(folder, "good", "v001.py"))  # the problem, in the history
    session = store.start_agent_session("vadd", "test", "test", os.getpid())
    host = StoreHost(workspace, problem_info(workspace, "vadd", context), store, session, None, threading.Event())
    toolbox = Toolbox(host, author="test")
    assert toolbox.use("search_context", {"query": "TiledMma"})[1]
    assert toolbox.use("read_file", {"path": "cute/copy.py", "offset": 7})[1]
    store.close()
    app = KernelTUI(workspace, run_scheduler=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.snapshot.problem == "vadd", pilot, timeout=30)
        await pilot.press("5")
        pane = app.query_one("#agent-view")
        await wait_for(lambda: "search_context" in pane.plain, pilot, timeout=30)  # type: ignore[attr-defined]
        text = pane.plain  # type: ignore[attr-defined]
    assert "⚙ search_context query=TiledMma" in text and "→ 1 hit: cute/copy.py:12-16 TiledMma" in text, text
    assert "⚙ read_file path=cute/copy.py offset=7" in text and "→ read lines 7-" in text, text
