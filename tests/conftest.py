"""Shared fixtures: a real workspace on disk, and the CLIs run as real subprocesses."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.judges import shared_judges, stop_shared_judges

FIXTURES = Path(__file__).parent / "fixtures"
VERSIONS = FIXTURES / "versions"  # honest versions, and ones that break (hang, crash, do not compile)
EXPLOITS = Path(__file__).parent / "exploits"  # versions that cheat the judge or attack its box
REPO = Path(__file__).parent.parent
HAS_CUDA = os.path.exists("/dev/nvidiactl")
# For tests about what surrounds a verdict (the agent loop, the dashboard's queue, the history): versions judged
# through correctness only. Compile, benchmark and dumps are tested on their own; in each of these tests they
# would cost a compile worker and its compiles per version.
VERDICT_RUNGS = ("load", "correctness")
VERDICT_LADDER = f"[ladder]\nrungs = {json.dumps(list(VERDICT_RUNGS))}\n"  # the same, in a config file


def pytest_configure(config: pytest.Config) -> None:
    """Every judge and worker the run starts writes a "start" line to the trace (KERNELTUI_TRACE), before any
    harness module reads where it goes: counted at the end, by test.
    Under xdist (`-n`) each worker has its own trace and shared judges; the controller runs no test."""
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        return
    if not os.environ.get("KERNELTUI_TRACE") or hasattr(config, "workerinput"):
        trace = Path(tempfile.mkdtemp(prefix="kerneltui-tests-")) / "trace.jsonl"
        trace.touch()
        os.environ["KERNELTUI_TRACE"] = str(trace)
    judges = shared_judges()  # kerneltui's judges, wherever started, are relays to the run's shared ones
    os.environ["KERNELTUI_PYTHON"] = str(judges.python)
    os.environ["KERNELTUI_JUDGE_HUB"] = str(judges.hub.path)


@pytest.fixture
def own_judges(monkeypatch: pytest.MonkeyPatch) -> None:
    """kerneltui starts judges of its own in this test, as it does for a person: the test is about them."""
    monkeypatch.delenv("KERNELTUI_PYTHON")
    monkeypatch.delenv("KERNELTUI_JUDGE_HUB")


STARTED: dict[str, Counter[str]] = {}  # judges and workers started, by test


def starts_in(text: str) -> Counter[str]:
    """Judges and workers (by mode) started, from trace lines."""
    found: Counter[str] = Counter()
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("op") == "start":
                found["judges" if entry.get("mode") == "judge" else f"{entry.get('mode')} workers"] += 1
    return found


TRACE_AT = pytest.StashKey[int]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    trace = Path(os.environ["KERNELTUI_TRACE"])
    item.stash[TRACE_AT] = trace.stat().st_size if trace.exists() else 0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    """The starts of a test's setup, call and teardown, its scoped fixtures' included, go with its teardown's
    report (to xdist's controller too)."""
    report = yield
    if call.when == "teardown" and TRACE_AT in item.stash:
        with contextlib.suppress(OSError), open(os.environ["KERNELTUI_TRACE"], "rb") as lines:
            lines.seek(item.stash[TRACE_AT])
            found = starts_in(lines.read().decode(errors="replace"))
            if found:
                report.user_properties.append(("kerneltui_starts", dict(found)))
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, found in report.user_properties:
        if name == "kerneltui_starts":
            STARTED[report.nodeid] = Counter(found)


# The longest modules (a clean run's seconds, summed over their tests, on a 2-core machine: 50-220 s each) are
# handed out first: pytest-xdist gives each process a whole module at a time, in collection order, and one of
# these begun last kept a process busy a minute or two after the others ran dry (test_lint: mypy with no cache,
# as in a clean clone, 90 s alone).
LONGEST_FIRST = (
    "test_exploits", "test_dashboard", "test_acp", "test_judge_versions", "test_forks", "test_examples", "test_cli",
    "test_lint", "test_mcp", "test_import_hostile", "test_demo", "test_remote_judges", "test_import_kernelbench",
    "test_claude_agent", "test_context_index", "test_shared_block", "test_precompile", "test_collected",
)  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: the rest keep their order
    import torch

    if torch.cuda.is_available():
        return
    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(no_gpu)


def pytest_sessionfinish(session: pytest.Session) -> None:
    stop_shared_judges()


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    by_test = STARTED
    total: Counter[str] = sum(by_test.values(), Counter())
    terminalreporter.section("judges and workers started")
    terminalreporter.write_line(", ".join(f"{n} {what}" for what, n in sorted(total.items())) or "none")
    judging = [(nodeid, found) for nodeid, found in by_test.items() if found["judges"]]
    busiest = sorted(by_test.items(), key=lambda item: -sum(item[1].values()))[:10]
    for nodeid, found in judging + [item for item in busiest if not item[1]["judges"]]:
        terminalreporter.write_line(f"  {', '.join(f'{n} {w}' for w, n in sorted(found.items()))}  {nodeid}")


def make_workspace(root: Path, problem: str = "vadd") -> Path:
    """A workspace holding one fixture problem; returns the problem folder."""
    folder = root / problem
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / problem / "problem.py", folder / "problem.py")
    return folder


def add_version(folder: Path, fixture: str, name: str | None = None) -> Path:
    target = folder / (name or f"{fixture}.py")
    source = VERSIONS / f"{fixture}.py"
    shutil.copy(source if source.exists() else EXPLOITS / f"{fixture}.py", target)
    return target


@pytest.fixture(autouse=True)
def context_indexes_without_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new context index in this process holds no installed package (triton's and CuTeDSL's sources are
    seconds to index and would outrank the small contexts tests search): tests that want them say so."""
    from agents import context_index

    monkeypatch.setattr(context_index, "NEW_INDEX_PACKAGES", ())


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """tmp/ws/vadd/problem.py; the fixture returns the problem folder."""
    return make_workspace(tmp_path / "ws")


def run(
    args: list[str], cwd: Path | None = None, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


def kerneltui(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return run(["-m", "kerneltui", *args], cwd=cwd, timeout=timeout)


def judge_many(
    paths: list[Path],
    serve_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    wait_s: float = 1800,
    **request: object,
) -> dict[str, dict]:
    """Judges versions in order by the run's shared judge for `serve_args` and `env` (tests/judges.py); returns
    their evaluations by path and stem (a refused version: {"error": ...}). Past `wait_s` seconds the test fails."""
    return shared_judges().get(serve_args, env).judge(paths, wait_s, **request)


@contextlib.contextmanager
def traced() -> Iterator[list[str]]:
    """The lines the run's judges and workers add to the trace (KERNELTUI_TRACE) while the block runs, filled in
    when it ends."""
    trace = Path(os.environ["KERNELTUI_TRACE"])
    before = trace.stat().st_size
    lines: list[str] = []
    yield lines
    with open(trace, "rb") as added:
        added.seek(before)
        lines += added.read().decode(errors="replace").splitlines()


def rung(evaluation: dict, name: str) -> dict:
    return next(r for r in evaluation["rungs"] if r["name"] == name)
