"""Agents measured on a suite (`kerneltui bench-agents`): a replayed agent and a scripted Claude (the real anthropic
SDK against a local Messages API) racing on three problems, judged by the real harness; fast_p, tokens and cost
read back from the history; the leaderboard from the CLI and in the dashboard."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from kerneltui.core.bench import leaderboard
from kerneltui.core.bench.suites import BenchError, copy_problem, parse_agent, suite_problems
from kerneltui.core.workspace import Workspace
from tests.conftest import FIXTURES, kerneltui, run
from tests.messages_api import MessagesAPI, Reply, text, tool_use

ELEMENTWISE = '''"""{doc}"""

import torch


def reference(x: torch.Tensor) -> torch.Tensor:
    return {expr}


def make_inputs(case: dict, seed: int, device) -> tuple:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(case["n"], generator=gen).to(device),)


cases = [{{"n": 1}}, {{"n": 1000}}, {{"n": 4097}}]
bench_cases = [{{"n": 1 << 20}}]
tolerance = {{"atol": 1e-6, "rtol": 1e-6}}


def cost(case: dict) -> dict:
    return {{"flops": case["n"], "bytes": 8 * case["n"]}}
'''

KERNEL = '''"""{doc}"""

import torch
import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, {expr}, mask=mask)


def custom_kernel(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out
'''

VADD = (FIXTURES / "versions" / "good.py").read_text()
RIGHT = {
    "scale2": KERNEL.format(doc="x times two", expr="x * 2.0"),
    "relu": KERNEL.format(doc="relu", expr="tl.maximum(x, 0.0)"),
    "vadd": VADD,
}
WRONG = KERNEL.format(doc="x times three: wrong", expr="x * 3.0")


def make_suite(root: Path) -> Path:
    suite = root / "suite"
    for name, doc, expr in (("scale2", "y = 2x", "x * 2"), ("relu", "y = relu(x)", "torch.relu(x)")):
        (suite / name).mkdir(parents=True)
        (suite / name / "problem.py").write_text(ELEMENTWISE.format(doc=doc, expr=expr))
    (suite / "vadd").mkdir()
    (suite / "vadd" / "problem.py").write_text((FIXTURES / "vadd" / "problem.py").read_text())
    (suite / "vadd" / "v001.py").write_text(VADD)  # a suite's own versions are not handed to the agents
    return suite


def make_recordings(root: Path) -> Path:
    """Replayed sessions: wrong then right on scale2 and vadd, only wrong on relu (2 of 3 solved)."""
    recordings = root / "recordings"
    for problem, steps in (("scale2", [WRONG, RIGHT["scale2"]]), ("vadd", [WRONG, VADD]), ("relu", [WRONG])):
        folder = recordings / problem
        folder.mkdir(parents=True)
        files = []
        for i, code in enumerate(steps, 1):
            (folder / f"{i:02d}.py").write_text(code)
            files.append({"file": f"{i:02d}.py", "say": f"step {i}", "after_s": 0})
        (folder / "session.json").write_text(json.dumps({"problem": problem, "model": "m", "steps": files}))
    return recordings


def first_text(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else " ".join(c.get("text", "") for c in content)


def tool_results(body: dict[str, Any]) -> list[str]:
    last = body["messages"][-1]["content"]
    if isinstance(last, str):
        return []
    found = [b for b in last if b.get("type") == "tool_result"]
    return [c if isinstance(c := b["content"], str) else " ".join(x.get("text", "") for x in c) for b in found]


def claude_script(number: int, body: dict[str, Any]) -> Reply:
    """Reads, for relu, the replayed agent's folder (refused), then writes the right version and ends its turn."""
    prompt = first_text(body)
    problem = next(p for p in RIGHT if f"Problem: {p}--claude" in prompt)
    results = tool_results(body)
    turn = len(body["messages"]) // 2
    if problem == "relu" and turn == 0:
        return Reply([tool_use("r1", "read_file", path="relu--replay/v001.py")], "tool_use")
    if problem == "relu" and turn == 1:
        assert "another agent's work (relu--replay), closed to this one" in results[0], results
    asked = [b for m in body["messages"] if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]
    if not any(b["name"] == "write_version" for b in asked):
        write = tool_use("w1", "write_version", code=RIGHT[problem], notes="one pass")
        return Reply([text(f"{problem}: one pass"), write], "tool_use")
    assert ": pass" in results[0], results
    return Reply([text("done")], "end_turn")


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    root = tmp_path_factory.mktemp("bench")
    suite, recordings = make_suite(root), make_recordings(root)
    (root / "kerneltui").mkdir()
    # fast_p reads correctness and the benchmark: the compile rung and the dumps are tested on their own
    ladder = '[ladder]\ntimeout = 30\nrungs = ["load", "correctness", "benchmark", "roofline"]\n'
    (root / "kerneltui" / "config.toml").write_text("[agent]\nretry_wait = 0.1\n" + ladder)
    with MessagesAPI(claude_script) as api:
        env = {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "test-key", "XDG_CONFIG_HOME": str(root)}
        args = ["bench-agents", str(suite), "--agent", f"replay:{recordings}", "--agent", "claude:claude-sonnet-4-6"]
        args += ["--budget", "3", "--race", "--into", str(root / "into"), "--json"]
        done = run(["-m", "kerneltui", *args], env=env, timeout=900)
    assert not api.failures, api.failures
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root / "into", json.loads(done.stdout), done.stderr


@pytest.mark.slow
def test_fast_p_and_each_agents_best_per_problem(bench: tuple[Path, dict[str, Any], str]) -> None:
    _, board, said = bench
    agents = {a["agent"]: a for a in board["agents"]}
    assert set(agents) == {"replay", "claude-sonnet-4-6"}
    assert agents["claude-sonnet-4-6"]["fast"]["fast_0"] == 1.0 and agents["claude-sonnet-4-6"]["solved"] == 3
    assert agents["replay"]["fast"]["fast_0"] == pytest.approx(2 / 3) and agents["replay"]["solved"] == 2
    assert agents["replay"]["fast"]["fast_1"] is None  # no GPU: unknown, never 0
    assert board["agents"][0]["agent"] == "claude-sonnet-4-6"  # ranked by fast_p
    entries = {(e["problem"], e["agent"]): e for e in board["problems"]}
    assert len(entries) == 6
    assert entries[("scale2", "replay")]["first_pass"] == "v002" and entries[("scale2", "replay")]["versions"] == 2
    assert entries[("relu", "replay")]["correct"] is False and entries[("relu", "replay")]["versions"] == 1
    claude = entries[("vadd", "claude-sonnet-4-6")]
    assert claude["correct"] and claude["versions_to_pass"] == 1 and claude["minutes_to_pass"] is not None
    # two turns per problem (three for relu): 1200 in + 2000 cache write + 5000 cache read, 300 out each
    assert claude["tokens_in"] == 2 * 8200 and claude["tokens_out"] == 600
    per_turn = (1200 + 2000 * 1.25 + 5000 * 0.1) * 3e-6 + 300 * 15e-6
    assert claude["cost_usd"] == pytest.approx(2 * per_turn)
    assert agents["claude-sonnet-4-6"]["tokens_in"] == 7 * 8200
    assert "relu--replay/v001: fail" in said and "starts" in said


@pytest.mark.slow
def test_each_agent_worked_on_its_own_copy(bench: tuple[Path, dict[str, Any], str]) -> None:
    into, _, _ = bench
    folders = sorted(p.name for p in Workspace(into).problems())
    assert folders == [f"{p}--{a}" for p in ("relu", "scale2", "vadd") for a in ("claude-sonnet-4-6", "replay")]
    assert not (into / "vadd--replay" / "v003.py").exists()  # the suite's own v001 was not copied in
    assert "x * 3.0" in (into / "vadd--replay" / "v001.py").read_text()


@pytest.mark.slow
def test_the_leaderboard_command_reads_the_run_back(bench: tuple[Path, dict[str, Any], str]) -> None:
    into, board, _ = bench
    shown = kerneltui("leaderboard", "--workspace", str(into))
    assert shown.returncode == 0, shown.stderr
    assert "fast_0" in shown.stdout and "claude-sonnet-4-6" in shown.stdout and "2/3" in shown.stdout
    assert "fast_p above 0 is unknown" in shown.stdout
    again = json.loads(kerneltui("leaderboard", "--workspace", str(into), "--json", "--p", "0,1.5").stdout)
    assert again["ps"] == [0.0, 1.5] and again["problems"] == board["problems"]
    none = kerneltui("leaderboard", "--workspace", str(FIXTURES / "vadd"))
    assert none.returncode == 2 and "no bench run" in none.stderr


@pytest.mark.slow
async def test_the_dashboard_shows_the_leaderboard(bench: tuple[Path, dict[str, Any], str]) -> None:
    from kerneltui.core.config import Config
    from kerneltui.ui.app import KernelTUI
    from kerneltui.ui.screens.leaderboard import LeaderboardScreen

    into, _, _ = bench
    app = KernelTUI(Workspace(into), Config(), run_scheduler=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("L")
        deadline = time.monotonic() + 30
        while "claude-sonnet-4-6" not in (drawn := app.export_screenshot()) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert isinstance(app.screen, LeaderboardScreen)
        assert "fast_0" in drawn and "scale2" in drawn and "relu" in drawn and "2/3" in drawn
        await pilot.press("escape")
        assert not isinstance(app.screen, LeaderboardScreen)


def test_agent_specs() -> None:
    acp = {"gemini": "gemini --acp"}
    assert parse_agent("replay", acp, "m").backend == "replay"
    spec = parse_agent("claude:claude-haiku-4-5", acp, "m")
    assert (spec.backend, spec.model, spec.label) == ("claude", "claude-haiku-4-5", "claude-haiku-4-5")
    assert parse_agent("claude", acp, "claude-opus-4-6").label == "claude-opus-4-6"
    assert parse_agent("gemini", acp, "m").acp == "gemini"
    spec = parse_agent("fast=acp:/usr/bin/my agent --acp", acp, "m")
    assert (spec.label, spec.backend, spec.acp) == ("fast", "acp", "/usr/bin/my agent --acp")
    with pytest.raises(BenchError, match="expected replay"):
        parse_agent("gpt", acp, "m")
    with pytest.raises(BenchError, match="no recorded session for matmul"):
        parse_agent("replay", acp, "m").recording_for("matmul-not-recorded")


def test_suites_from_a_folder_a_file_or_one_problem(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    assert [p.name for p in suite_problems(suite)] == ["relu", "scale2", "vadd"]
    assert [p.name for p in suite_problems(suite / "vadd")] == ["vadd"]
    listed = tmp_path / "suite.txt"
    listed.write_text("# two of them\nsuite/vadd\nsuite/relu  # elementwise\n")
    assert [p.name for p in suite_problems(listed)] == ["vadd", "relu"]
    listed.write_text("suite/nothing\n")
    with pytest.raises(BenchError, match="not problem folders"):
        suite_problems(listed)
    (tmp_path / "empty").mkdir()
    with pytest.raises(BenchError, match="holds no problem folders"):
        suite_problems(tmp_path / "empty")
    with pytest.raises(BenchError, match="does not exist"):
        suite_problems(tmp_path / "nowhere")
    copied = copy_problem(suite / "vadd", tmp_path / "into", "vadd--x")
    again = copy_problem(suite / "vadd", tmp_path / "into", "vadd--x")
    assert (copied, again) == ("vadd--x", "vadd--x-2")
    assert not (tmp_path / "into" / "vadd--x" / "v001.py").exists()


def row(name: str, status: str, speedup: float | None = None, flags: str = "[]", verdict: str | None = None) -> dict:
    return {"name": name, "status": status, "speedup": speedup, "flags": flags, "verdict": verdict, "finished": None}


def test_fast_p_counts_only_clean_or_approved_passes() -> None:
    entry = {"problem": "p", "agent": "a", "folder": "p--a"}
    flagged = '[{"name": "uses-library", "reason": "torch.mm"}]'
    solved = leaderboard.entry_figures(entry, [row("v001", "fail"), row("v002", "pass", 1.4), row("v003", "pass", 2.5)])
    cheat = leaderboard.entry_figures(entry, [row("v001", "pass", 9.0, flags=flagged)])
    approved = leaderboard.entry_figures(entry, [row("v001", "pass", 1.1, flags=flagged, verdict="approved")])
    rejected = leaderboard.entry_figures(entry, [row("v001", "pass", 3.0, verdict="rejected")])
    assert (solved.best_version, solved.versions_to_pass, solved.first_pass) == ("v003", 2, "v002")
    assert not cheat.correct and cheat.flagged == 1 and approved.correct and not rejected.correct
    entries = [solved, cheat, approved, rejected]
    assert leaderboard.fast_p(entries, 0) == 0.5
    assert leaderboard.fast_p(entries, 1.0) == 0.5
    assert leaderboard.fast_p(entries, 2.0) == 0.25
    untimed = leaderboard.entry_figures(entry, [row("v001", "pass")])
    assert leaderboard.fast_p([untimed], 1.0) is None and leaderboard.fast_p([untimed], 0) == 1.0


def test_an_acp_agent_in_a_bench_gets_an_mcp_server_closed_to_the_others(tmp_path: Path) -> None:
    import sys

    from kerneltui.core.config import AgentConfig, Config
    from kerneltui.core.session import Session

    suite = make_suite(tmp_path)
    into = tmp_path / "into"
    for name in ("vadd--a", "vadd--b"):
        copy_problem(suite / "vadd", into, name)
    workspace = Workspace(into)
    session = Session(workspace, Config(), lambda event: None)
    try:
        agent = AgentConfig(backend="acp", acp=f"{sys.executable} -c pass")
        run = session.start_agent("vadd--a", agent=agent, hidden=(into / "vadd--b",))
        command = run.agent.mcp_command  # type: ignore[attr-defined]
        hidden = [command[i + 1] for i, word in enumerate(command) if word == "--hide"]
        assert hidden == ["vadd--b"] and command[command.index("--problem") + 1] == "vadd--a", command
    finally:
        session.close()


@pytest.mark.slow
def test_an_agent_past_the_time_limit_is_stopped(tmp_path: Path) -> None:
    """Versions and cost bound an agent; a wall-clock limit bounds one that spends neither."""
    suite = make_suite(tmp_path)
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "01.py").write_text(RIGHT["scale2"])
    steps = [{"file": "01.py", "say": "after a long think", "after_s": 600}]
    (slow / "session.json").write_text(json.dumps({"problem": "scale2", "model": "m", "steps": steps}))
    started = time.monotonic()
    args = ["bench-agents", str(suite / "scale2"), "--agent", f"replay:{slow}", "--pace", "1", "--minutes", "0.05"]
    done = kerneltui(*args, "--into", str(tmp_path / "into"), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - started < 120
    entry = json.loads(done.stdout)["problems"][0]
    assert entry["stop_reason"].startswith("the bench's time limit (0.05 min)") and entry["versions"] == 0, entry
