"""The agents' tools on a real workspace and history: confined paths, cut outputs, dumps and search."""

from __future__ import annotations

import ast
import os
import threading
import time
from pathlib import Path

import pytest

from agents.tools import MAX_OUTPUT_CHARS, Toolbox, ToolError, grep_lines
from kerneltui.core.agents.host import StoreHost, problem_info, with_notes
from kerneltui.history.store import Store
from tests import dashboard_fixtures
from tests.conftest import make_workspace


@pytest.fixture
def toolbox(tmp_path: Path) -> Toolbox:
    workspace = dashboard_fixtures.build(tmp_path / "ws")
    context = tmp_path / "context"
    (context / "cute").mkdir(parents=True)
    (context / "ptx-notes.md").write_text("# PTX\nld.global.v4.f32 loads 16 bytes per thread.\ncp.async.bulk is TMA.\n")
    (context / "cute" / "copy.py").write_text("def copy_async():\n    '''cp.async with 16-byte vectors'''\n")
    (tmp_path / "secret.txt").write_text("the API key")
    store = Store(workspace.db_path)
    session = store.start_agent_session("vadd", "test", "test", os.getpid())
    host = StoreHost(workspace, problem_info(workspace, "vadd", context), store, session, None, threading.Event())
    return Toolbox(host, author="test")


def test_paths_outside_the_workspace_and_context_are_refused(toolbox: Toolbox, tmp_path: Path) -> None:
    (tmp_path / "ws" / "vadd" / "escape.py").symlink_to(tmp_path / "secret.txt")
    for path in ("../secret.txt", str(tmp_path / "secret.txt"), "vadd/escape.py", "/etc/passwd", "~/.bashrc"):
        output, ok = toolbox.call("read_file", {"path": path})
        assert not ok and "outside the folders this agent may read" in output, (path, output)
        assert "the API key" not in output


def test_files_in_the_workspace_and_the_context_are_read(toolbox: Toolbox) -> None:
    output, ok = toolbox.call("read_file", {"path": "vadd/problem.py"})
    assert ok and "def reference" in output
    output, ok = toolbox.call("read_file", {"path": "context/ptx-notes.md"})
    assert ok and "ld.global.v4.f32" in output
    output, ok = toolbox.call("read_file", {"path": "cute/copy.py"})  # relative to the context folder too
    assert ok and "copy_async" in output
    output, ok = toolbox.call("read_file", {"path": "vadd/nothing.py"})
    assert not ok and "no such file" in output
    output, ok = toolbox.call("read_file", {"path": "problem.py"})  # it said only "no such file"
    assert not ok and "relative paths start at the workspace" in output and "vadd/problem.py" in output, output


def test_huge_outputs_are_cut_with_a_note(toolbox: Toolbox, tmp_path: Path) -> None:
    big = tmp_path / "ws" / "vadd" / "big.txt"
    big.write_text("".join(f"line {i} " + "x" * 80 + "\n" for i in range(20_000)))
    output, ok = toolbox.call("read_file", {"path": "vadd/big.txt"})
    assert ok and len(output) <= MAX_OUTPUT_CHARS + 200
    assert output.rstrip().endswith("]") and "[cut:" in output and "offset" in output
    again, ok = toolbox.call("read_file", {"path": "vadd/big.txt", "offset": 19_990})
    assert ok and "line 19999" in again and "[cut" not in again


def test_search_context_ranks_files_by_words(toolbox: Toolbox) -> None:
    output, ok = toolbox.call("search_context", {"query": "cp.async 16-byte"})
    assert ok
    assert output.splitlines()[0].startswith("cute/copy.py:1-2  copy_async  (2 of 2 words)"), output
    assert "ptx-notes.md:3: cp.async.bulk is TMA." in output
    output, ok = toolbox.call("search_context", {"query": "wgmma"})
    assert ok and "nothing in the context folder matches" in output


def test_read_dump_windows_and_greps(toolbox: Toolbox) -> None:
    output, ok = toolbox.call("read_dump", {"version": "v002", "kind": "sass", "grep": "LDG"})
    assert ok and "2 matching lines" in output and "LDG.E.128" in output
    output, ok = toolbox.call("read_dump", {"version": "v002", "kind": "sass", "kernel": "nope"})
    assert not ok and "kernels: add_kernel" in output
    output, ok = toolbox.call("read_dump", {"version": "v002", "kind": "ptx"})
    assert not ok and "it has sass" in output
    output, ok = toolbox.call("read_dump", {"version": "v002", "kind": "sass", "grep": "("})
    assert not ok and "not a regular expression" in output


def test_unknown_tools_and_bad_arguments_are_errors_not_crashes(toolbox: Toolbox) -> None:
    output, ok = toolbox.call("rm_rf", {})
    assert not ok and "no tool 'rm_rf'" in output
    output, ok = toolbox.call("read_file", {"file": "x"})
    assert not ok and "bad arguments for read_file" in output
    output, ok = toolbox.call("write_version", {"code": "print('hi')", "notes": ""})
    assert not ok and "custom_kernel" in output
    output, ok = toolbox.call("read_results", {"version": "v999"})
    assert not ok and "v001" in output


def test_a_kernelbench_version_defining_only_model_new_is_written(toolbox: Toolbox) -> None:
    host = toolbox.host
    assert isinstance(host, StoreHost)
    host.wait_s = 0.05  # no judge runs here: the write is what is checked
    code = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    output, ok = toolbox.call("write_version", {"code": code, "notes": "KernelBench's form"})
    assert ok, output
    written = sorted(host.problem.folder.glob("v*.py"))[-1]
    assert "class ModelNew" in written.read_text()


def test_a_version_name_taken_meanwhile_is_skipped_never_overwritten(
    toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = toolbox.host
    assert isinstance(host, StoreHost)
    folder = host.problem.folder
    before = (folder / "v001.py").read_text()
    monkeypatch.setattr(host, "_next_number", lambda: 1)  # as if another agent wrote v001-v004 since we looked
    written = folder / ".draft.writing"
    written.write_text("def custom_kernel(a, b):\n    return a + b\n")
    path = host._link_next(written)
    assert path.name == "v005.py" and path.read_text() == written.read_text()
    assert (folder / "v001.py").read_text() == before


def test_a_fault_inside_a_tool_is_not_blamed_on_the_arguments(
    toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any TypeError used to read "bad arguments": a bug of ours sent the model off fixing calls that were right."""
    output, ok = toolbox.call("read_results", {"version": "v001", "colour": "red"})
    assert not ok and output.startswith("bad arguments for read_results") and "colour" in output
    output, ok = toolbox.call("read_file", {"path": "vadd/problem.py", "offset": "ten"})
    assert not ok and output == "bad arguments for read_file: offset must be int, not str"

    def broken(version: str) -> None:
        raise TypeError("unsupported operand type(s) for +: 'NoneType' and 'int'")

    monkeypatch.setattr(toolbox.host, "results", broken)
    output, ok = toolbox.call("read_results", {"version": "v001"})
    assert not ok and "failed inside kerneltui (TypeError" in output and "bad arguments" not in output


def test_the_claude_and_mcp_tools_come_from_one_definition(tmp_path: Path) -> None:
    """The tools were declared twice (JSON schemas for Claude, annotated closures for MCP), and drifted."""
    import asyncio

    from agents.tools import TOOL_SPECS
    from kerneltui.core.config import Config
    from kerneltui.core.session import Session
    from kerneltui.core.workspace import Workspace
    from kerneltui.mcp_server import build_server

    folder = make_workspace(tmp_path / "ws")
    session = Session(Workspace(folder.parent), Config(), on_event=lambda event: None, run_scheduler=False)
    listed = asyncio.run(build_server(session).list_tools())
    mcp = {tool.name: tool.input_schema for tool in listed}
    for spec in TOOL_SPECS:
        theirs, ours = mcp[spec["name"]], spec["input_schema"]
        assert set(theirs["properties"]) == set(ours["properties"]) | {"problem"}, spec["name"]
        assert set(theirs["required"]) == set(ours.get("required", [])) | {"problem"}, spec["name"]
        for key, prop in ours["properties"].items():
            assert theirs["properties"][key]["description"] == prop["description"], (spec["name"], key)


def test_with_no_context_configured_agents_get_the_shipped_notes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It looked for kerneltui/context, which does not exist: agents got no context folder at all."""
    from kerneltui.core.agents.host import find_context
    from kerneltui.core.workspace import Workspace

    monkeypatch.delenv("KERNELTUI_CONTEXT", raising=False)
    found = find_context(Workspace(tmp_path))
    assert found is not None and (found / "notes" / "triton.md").is_file(), found


def test_the_task_names_the_context_notes(tmp_path: Path) -> None:
    from agents.prompt import task_prompt
    from kerneltui.core.agents.host import find_context
    from kerneltui.core.workspace import Workspace

    workspace = Workspace(make_workspace(tmp_path / "ws").parent)
    context = tmp_path / "context"
    (context / "notes").mkdir(parents=True)
    for name in ("cutedsl-layouts.md", "triton.md"):
        (context / "notes" / name).write_text(f"# {name}\n")
    (context / "cutlass" / "examples" / "python" / "CuTeDSL").mkdir(parents=True)  # as `context fetch` leaves it
    (context / "cutlass" / "include" / "cute").mkdir(parents=True)
    prompt = task_prompt(problem_info(workspace, "vadd", find_context(workspace, str(context))))
    assert "notes/cutedsl-layouts.md, notes/triton.md" in prompt and str(context) in prompt
    assert "a cutlass checkout in cutlass/ (cutlass/examples/python/CuTeDSL, cutlass/include/cute)" in prompt
    assert "the installed CuTeDSL (nvidia-cutlass-dsl) as site/cutlass/" in prompt  # a dependency of ours
    assert "the installed Triton as site/triton/" in prompt
    assert "no context folder" in task_prompt(problem_info(workspace, "vadd", None))


@pytest.mark.timeout(120, method="thread")  # before the fix re's matching could not be interrupted at all
def test_a_grep_pattern_that_backtracks_for_ever_is_refused_in_time() -> None:
    """read_dump's grep ran the agent's pattern with re, which backtracked for hours on `(a|aa)+$` holding the
    GIL: the whole MCP server froze, and SIGTERM could not end it."""
    started = time.monotonic()
    with pytest.raises(ToolError, match="took over"):
        grep_lines(["a" * 60 + "c"] * 3, "(a|aa)+$")
    assert time.monotonic() - started < 30
    assert "1 matching lines" in grep_lines(["mov.u32 %r1, 0;", "add.f32 %f3, %f1, %f2;"], r"ADD\.F32")


def test_notes_with_control_characters_still_make_a_loadable_version() -> None:
    """An agent's notes holding a NUL were pasted into the docstring as they were: the version could not even be
    parsed ("source code string cannot contain null bytes"), failed at load, and its notes were lost."""
    text = with_notes("def custom_kernel(a):\n    return a\n", 'faster\x00 by \u202e half\x1b[2J """ and\tmore')
    assert ast.get_docstring(ast.parse(text), clean=False) == "faster by  half[2J ''' and\tmore"
