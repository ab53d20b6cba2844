"""Imports treat the folder or file they bring in as hostile: files come only from inside it, task.yml is read
with bounds, module constants are evaluated with bounds, the problem's own code runs in a contained process
with no secret, in bounded time, and a refused import leaves nothing behind."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.problem.load import load_problem
from kerneltui.core.workspace import WorkspaceError
from kerneltui.formats.gpumode import import_problem
from kerneltui.formats.kernelbench import file_constants
from tests.conftest import FIXTURES, REPO, kerneltui

GPUMODE = FIXTURES / "gpumode"
KB = FIXTURES / "kernelbench"
FAKE_KEY = "sk-ant-fake-0123456789-not-a-real-key"


def vectoradd(tmp_path: Path) -> Path:
    """A copy of the vector add problem with utils.py inside it (task.yml names it there)."""
    source = tmp_path / "src" / "vectoradd_py"
    shutil.copytree(GPUMODE / "vectoradd_py", source)
    shutil.copy(GPUMODE / "utils.py", source / "utils.py")
    task = source / "task.yml"
    task.write_text(task.read_text().replace('"source": "../utils.py"', '"source": "utils.py"'))
    return source


def with_files_entry(source: Path, entry: str) -> None:
    task = source / "task.yml"
    task.write_text(task.read_text().replace('"source": "utils.py"', f'"source": "{entry}"'))


def leftovers(ws: Path) -> list[str]:
    return sorted(p.name for p in ws.iterdir()) if ws.exists() else []


def cli(*args: str, env: dict[str, str] | None = None, memory_bytes: int | None = None) -> subprocess.CompletedProcess:
    """`kerneltui ARGS` in a subprocess with `env` added, and an address-space bound where given."""

    def bound() -> None:
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, resource.RLIM_INFINITY))

    return subprocess.run(
        [sys.executable, "-m", "kerneltui", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ, **(env or {})),
        preexec_fn=bound,
    )


# --- files from inside the folder ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("/proc/self/environ", "an absolute path"),
        ("../utils.py", "leaves the problem folder"),
        ("sub/../../outside.py", "leaves the problem folder"),
        ("link.py", "a symbolic link"),
        ("linked_dir/utils.py", "a symbolic link"),
    ],
)
def test_files_entries_come_only_from_inside_the_folder(tmp_path: Path, entry: str, why: str) -> None:
    source = vectoradd(tmp_path)
    secret = tmp_path / "src" / "outside.py"
    secret.write_text(f"KEY = {FAKE_KEY!r}\n")
    shutil.copy(secret, tmp_path / "src" / "utils.py")
    (source / "link.py").symlink_to(secret)
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(secret, tmp_path / "elsewhere" / "utils.py")
    (source / "linked_dir").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with_files_entry(source, entry)
    ws = tmp_path / "ws"
    with pytest.raises(WorkspaceError, match=why) as refused:
        import_problem(source, ws)
    assert entry in str(refused.value) and "utils.py" in str(refused.value)  # the entry is named
    assert leftovers(ws) == []


def test_a_symlinked_reference_or_solution_is_refused(tmp_path: Path) -> None:
    source = vectoradd(tmp_path)
    secret = tmp_path / "secret.py"
    secret.write_text(f"KEY = {FAKE_KEY!r}\n")
    (source / "solutions" / "correct" / "z_link.py").symlink_to(secret)
    with pytest.raises(WorkspaceError, match=r"solutions/correct/z_link\.py.*a symbolic link"):
        import_problem(source, tmp_path / "ws")
    assert leftovers(tmp_path / "ws") == []


def test_files_from_the_folder_above_only_when_the_person_says_so(tmp_path: Path) -> None:
    """GPU MODE's problems take utils.py from the folder above: --files-root widens where files may come from,
    and still only to Python files inside it."""
    source = tmp_path / "src" / "vectoradd_py"
    shutil.copytree(GPUMODE / "vectoradd_py", source)
    shutil.copy(GPUMODE / "utils.py", source.parent / "utils.py")
    (source / "solutions").rename(tmp_path / "solutions")  # no versions: the files are what is looked at here
    with pytest.raises(WorkspaceError, match="--files-root"):
        import_problem(source, tmp_path / "ws")
    folder = import_problem(source, tmp_path / "ws", files_root=source.parent)
    assert (folder / "utils.py").read_text() == (GPUMODE / "utils.py").read_text()
    (source.parent / "env.txt").write_text(FAKE_KEY)
    task = source / "task.yml"
    task.write_text(task.read_text().replace('"source": "../utils.py"', '"source": "../env.txt"'))
    with pytest.raises(WorkspaceError, match=r"\.\./env\.txt.*not a Python file"):
        import_problem(source, tmp_path / "ws", name="again", files_root=source.parent)


@pytest.mark.slow
def test_the_environment_is_not_exfiltrated_through_files(tmp_path: Path) -> None:
    source = vectoradd(tmp_path)
    with_files_entry(source, "/proc/self/environ")
    ws = tmp_path / "ws"
    done = cli("import", "gpumode", str(source), "--into", str(ws), env={"ANTHROPIC_API_KEY": FAKE_KEY})
    assert done.returncode == 2 and "/proc/self/environ" in done.stderr and "Traceback" not in done.stderr
    assert FAKE_KEY not in done.stdout + done.stderr
    written = [p for p in ws.rglob("*") if p.is_file()] if ws.exists() else []
    assert not [p for p in written if FAKE_KEY.encode() in p.read_bytes()]


# --- task.yml read with bounds -------------------------------------------------------------------------------

ALIAS_BOMB = """\
a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
tests:
  - {"size": *i, "seed": 1}
"""


@pytest.mark.slow
def test_a_yaml_alias_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    source = vectoradd(tmp_path)
    (source / "task.yml").write_text(ALIAS_BOMB)
    ws = tmp_path / "ws"
    done = cli("import", "gpumode", str(source), "--into", str(ws), memory_bytes=3 << 30)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "task.yml" in done.stderr and "alias" in done.stderr and "Traceback" not in done.stderr
    assert leftovers(ws) == []


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("a: &a [1]\nb: [*a, *a, *a]\n" * 1, None),  # a few aliases are fine
        ("x: &x [[[[[[[[1]]]]]]]]\n" + "".join(f"k{i}: *x\n" for i in range(200)), "aliases"),
        ("deep: " + "[" * 400 + "]" * 400 + "\n", "nested"),
        ("tests: []\n" + "#" * (2 << 20), "larger than"),
        ("tests: [{size: " + "9" * 5000 + "}]\n", "a value cannot be read"),
        ("when: 2001-13-45\n", "a value cannot be read"),
    ],
    ids=["few-aliases", "many-aliases", "deep", "large", "long-int", "bad-date"],
)
def test_task_yml_is_read_with_bounds(tmp_path: Path, text: str, why: str | None) -> None:
    from kerneltui.formats.gpumode import read_task

    (tmp_path / "task.yml").write_text(text)
    if why is None:
        assert read_task(tmp_path)["b"] == [[1], [1], [1]]
        return
    with pytest.raises(WorkspaceError, match=why):
        read_task(tmp_path)


# --- module constants evaluated with bounds ------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "9 ** 9 ** 9",
        "'a' * 10 ** 10",
        "(1,) * 10 ** 9",
        "1 << 10 ** 10",
        "2 ** 100000",
        "-(" * 150 + "1" + ")" * 150,
        "[1] * 10 ** 8 + [2]",
        "[[1] * 9000] * 9000",
    ],
    ids=["power-tower", "str-repeat", "tuple-repeat", "shift", "big-power", "deep", "list-repeat", "nested-repeat"],
)
def test_constants_are_evaluated_with_bounds(expression: str) -> None:
    text = f"batch_size = 16\nhuge = {expression}\n"
    with pytest.raises(WorkspaceError, match="huge"):
        file_constants(text)


def test_string_formatting_is_left_to_the_contained_run() -> None:
    """'%*d' % (10 ** 9, 1) is a gigabyte: not evaluated here (the module's own run is bounded)."""
    assert file_constants("n = 4\nwide = '%*d' % (10 ** 9, 1)\nname = 'x%d' % n\n") == {"n": 4}


def test_constants_within_the_bounds_are_evaluated() -> None:
    text = "n = 2 ** 20\nm = n * 3 // 2\nshape = (n, m)\nname = 'x' * 4\nneg = -n\nf = 1.5 ** 2\nlst = [n, 1]\n"
    assert file_constants(text) == {
        "n": 1 << 20,
        "m": 3 << 19,
        "shape": (1 << 20, 3 << 19),
        "name": "xxxx",
        "neg": -(1 << 20),
        "f": 2.25,
        "lst": [1 << 20, 1],
    }


@pytest.mark.slow
def test_a_constant_bomb_is_refused_by_the_command(tmp_path: Path) -> None:
    path = tmp_path / "bomb.py"
    path.write_text((KB / "leaky_relu.py").read_text() + "\nblowup = 9 ** 9 ** 9\n")
    done = kerneltui("import", "kernelbench", str(path), "--into", str(tmp_path / "ws"), timeout=300)
    assert done.returncode == 2 and "blowup" in done.stderr and "Traceback" not in done.stderr
    assert leftovers(tmp_path / "ws") == []


# --- --set carries into derived constants --------------------------------------------------------------------

DERIVED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer plus a bias of its own shape."""

    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return self.linear(x) + self.bias


batch_size = 16
in_features = 64
out_features = 32
bias_shape = (out_features,)
scaled = out_features * 2


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bias_shape]
'''


@pytest.mark.slow
def test_set_carries_into_derived_constants(tmp_path: Path) -> None:
    path = tmp_path / "derived.py"
    path.write_text(DERIVED)
    ws = tmp_path / "ws"
    done = kerneltui("import", "kernelbench", str(path), "--into", str(ws), "--set", "out_features=8")
    assert done.returncode == 0, done.stderr
    problem = load_problem(ws / "derived")
    assert problem.cases[0]["bias_shape"] == (8,) and problem.cases[0]["scaled"] == 16
    assert problem.bench_cases[0]["bias_shape"] == (32,)  # the file's sizes for timing


# --- the problem's code: contained, bounded, no secret, nothing half-made --------------------------------------

SNOOP = """
import os as _os

def _snoop():
    seen = [k for k, v in _os.environ.items() if "fake-0123456789" in v]
    for pid in ("self", str(_os.getppid()), "1"):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if b"fake-0123456789" in f.read():
                    seen.append(f"/proc/{pid}/environ")
        except OSError:
            pass
    if seen:
        raise RuntimeError("saw the key in " + ", ".join(seen) + ": " + _os.environ.get("ANTHROPIC_API_KEY", ""))

_snoop()
"""


@pytest.mark.slow
def test_the_reference_runs_without_the_persons_secrets(tmp_path: Path) -> None:
    source = vectoradd(tmp_path)
    reference = source / "reference.py"
    reference.write_text(reference.read_text() + SNOOP)
    ws = tmp_path / "ws"
    done = cli("import", "gpumode", str(source), "--into", str(ws), env={"ANTHROPIC_API_KEY": FAKE_KEY})
    assert FAKE_KEY not in done.stdout + done.stderr
    assert done.returncode == 0, done.stderr
    assert "runs reference.py" in done.stderr and "contained" in done.stderr  # the command says so


@pytest.mark.slow
def test_a_reference_that_loops_is_stopped_by_the_bound(tmp_path: Path) -> None:
    source = vectoradd(tmp_path)
    reference = source / "reference.py"
    reference.write_text(
        reference.read_text().replace('    gen = torch.Generator(device="cuda")', "    while True: pass")
    )
    ws = tmp_path / "ws"
    done = kerneltui("import", "gpumode", str(source), "--into", str(ws), "--check-timeout", "20", timeout=600)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "20 s" in done.stderr and "--check-timeout" in done.stderr
    assert leftovers(ws) == []


@pytest.mark.slow
def test_a_refused_import_leaves_nothing_and_the_next_one_succeeds(tmp_path: Path) -> None:
    source = vectoradd(tmp_path)
    reference = source / "reference.py"
    good = reference.read_text()
    reference.write_text(good.replace('    gen = torch.Generator(device="cuda")', '    raise ValueError("no inputs")'))
    ws = tmp_path / "ws"
    done = kerneltui("import", "gpumode", str(source), "--into", str(ws))
    assert done.returncode == 2 and "no inputs" in done.stderr
    assert leftovers(ws) == []
    reference.write_text(good)
    done = kerneltui("import", "gpumode", str(source), "--into", str(ws))
    assert done.returncode == 0, done.stderr
    assert leftovers(ws) == ["vectoradd_py"] and load_problem(ws / "vectoradd_py").cases


@pytest.mark.slow
def test_the_kernelbench_check_runs_the_forward_pass_on_the_correctness_case(tmp_path: Path) -> None:
    path = tmp_path / "bad_forward.py"
    text = (KB / "leaky_relu.py").read_text()
    assert "def forward(self, x" in text
    path.write_text(
        text.replace(
            "def forward(self, x", 'def forward(self, x):\n        raise ValueError("no forward")\n\n    def _f(self, x'
        )
    )
    ws = tmp_path / "ws"
    done = kerneltui("import", "kernelbench", str(path), "--into", str(ws), "--set", "dim=16")
    assert done.returncode == 2 and "no forward" in done.stderr and "Traceback" not in done.stderr
    assert "runs bad_forward.py" in done.stderr
    assert leftovers(ws) == []


@pytest.mark.parametrize("dest", ["problem.py", "v001.py", "v2_fast.py"])
def test_a_files_entry_may_not_name_what_the_import_writes(tmp_path: Path, dest: str) -> None:
    source = vectoradd(tmp_path)
    task = source / "task.yml"
    entry = '  - {"name": "task.py", "source": "task.py"}\n'
    task.write_text(task.read_text().replace(entry, entry + f'  - {{"name": "{dest}", "source": "utils.py"}}\n'))
    with pytest.raises(WorkspaceError, match=f"files entry {dest}: a name the import writes itself"):
        import_problem(source, tmp_path / "ws")
    assert leftovers(tmp_path / "ws") == []


@pytest.mark.slow
def test_a_reference_past_the_memory_bound_is_refused(tmp_path: Path) -> None:
    source = vectoradd(tmp_path)
    reference = source / "reference.py"
    reference.write_text(reference.read_text() + "\n_hoard = bytearray(3 << 30)\n")
    ws = tmp_path / "ws"
    done = kerneltui("import", "gpumode", str(source), "--into", str(ws), "--check-memory-mb", "2048")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "MemoryError" in done.stderr and "--check-memory-mb raises it" in done.stderr
    assert leftovers(ws) == []


@pytest.mark.slow
def test_a_link_left_in_the_problem_folder_is_not_followed_for_the_reference(tmp_path: Path) -> None:
    """--force starts from the folder there now: a link an agent left in it must not bring what it leads to
    within the reference's reach."""
    source = vectoradd(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text(FAKE_KEY)
    ws = tmp_path / "ws"
    (ws / "vectoradd_py").mkdir(parents=True)
    (ws / "vectoradd_py" / "notes.txt").symlink_to(secret)
    reference = source / "reference.py"
    reference.write_text(
        reference.read_text()
        + "\nimport pathlib as _p\n_n = _p.Path(__file__).with_name('notes.txt')\n"
        + "try:\n    _seen = _n.read_text()\nexcept OSError:\n    _seen = ''\n"
        + "if _seen:\n    raise RuntimeError('read ' + _seen)\n"
    )
    done = kerneltui("import", "gpumode", str(source), "--into", str(ws), "--force")
    assert FAKE_KEY not in done.stdout + done.stderr
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_a_kernelbench_forward_past_the_bound_suggests_smaller_sizes(tmp_path: Path) -> None:
    path = tmp_path / "slow_forward.py"
    text = (KB / "leaky_relu.py").read_text()
    path.write_text(
        text.replace(
            "        return torch.where(", "        while True:\n            pass\n        return torch.where("
        )
    )
    done = kerneltui("import", "kernelbench", str(path), "--into", str(tmp_path / "ws"), "--check-timeout", "15")
    assert done.returncode == 2 and "ran past 15 s" in done.stderr and "--set smaller ones" in done.stderr
    assert leftovers(tmp_path / "ws") == []


@pytest.mark.slow
def test_a_thread_the_reference_leaves_running_does_not_hold_the_import(tmp_path: Path) -> None:
    source = vectoradd(tmp_path)
    reference = source / "reference.py"
    reference.write_text(
        reference.read_text() + "\nimport threading as _t, time as _time\n"
        "_t.Thread(target=lambda: _time.sleep(10**6)).start()\n"
    )
    done = kerneltui("import", "gpumode", str(source), "--into", str(tmp_path / "ws"), "--check-timeout", "120")
    assert done.returncode == 0, done.stderr
