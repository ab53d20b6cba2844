"""GPU MODE's reference-kernels format: two small problems written here after its documentation
(tests/fixtures/gpumode: a vector add whose output buffer is among its tuple of inputs, checked by a
make_match_reference-style pair; a histogram of dict inputs with its own check_implementation answering a string),
imported and judged with their correct and wrong solutions; the harness's own side of it (a problem's check,
output buffers, files versions import) on a native problem; the export of a version as a submission."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
import torch

from harness.judge.outputs import buffers_of, mutated_inputs
from harness.problem.load import ProblemError, check_answer, load_problem
from kerneltui.cli.export import chosen_version
from kerneltui.core.workspace import Workspace, WorkspaceError
from kerneltui.formats.gpumode import _cases, export_version, import_problem, parse_buffer
from tests.conftest import judge_many, kerneltui, rung

GPUMODE = Path(__file__).parent / "fixtures" / "gpumode"

NATIVE_PROBLEM = '''
"""Scale a vector by 2 into the output buffer passed beside it."""
import torch

def reference(x, out):
    return x * 2

def make_inputs(case, seed, device):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(case["n"], generator=gen).to(device)
    return (x, torch.full((case["n"],), 7.0, device=device))

def check(inputs, output):
    x, _ = inputs
    return (True, "") if torch.equal(output, x * 2) else (False, "not exactly twice x")

cases = [{"n": 5}, {"n": 300}]
bench_cases = []
tolerance = {"atol": 1e-6, "rtol": 1e-6}
output_buffers = [1]
version_files = ["sizes.py"]

def cost(case):
    return {"flops": case["n"], "bytes": 8 * case["n"]}
'''

TWICE_KERNEL = """
import triton
import triton.language as tl
from sizes import BLOCK


@triton.jit
def twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, {value}, mask=mask)


def custom_kernel(x, out):
    twice[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
"""
NATIVE_VERSIONS = {
    "v001.py": '"""Twice x, written into the buffer; returns None."""'
    + TWICE_KERNEL.format(value="tl.load(x_ptr + offs, mask=mask) * 2"),
    # within the tolerance, but not exactly twice x: the problem's check fails it beside the tolerance. The hair
    # survives float32 rounding for |2x| < ~1.6 (most draws); 1e-9 vanished unless some |x| < ~0.008, and about one
    # run in seven passed the version
    "v002.py": '"""Twice x plus a hair."""' + TWICE_KERNEL.format(value="tl.load(x_ptr + offs, mask=mask) * 2 + 2e-7"),
}


def imported(into: Path, name: str) -> Path:
    return import_problem(GPUMODE / name, into, files_root=GPUMODE)  # utils.py from the folder above


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict], Path]:
    """Every version here through one judge: the imported solutions, the native problem's, a broken problem's."""
    ws = tmp_path_factory.mktemp("gpumode") / "ws"
    vadd, hist = imported(ws, "vectoradd_py"), imported(ws, "histogram_py")
    native = ws / "twice"
    native.mkdir()
    (native / "problem.py").write_text(NATIVE_PROBLEM)
    (native / "sizes.py").write_text("BLOCK = 128\n")
    for name, text in NATIVE_VERSIONS.items():
        (native / name).write_text(text)
    broken = imported(ws / "broken", "vectoradd_py")
    reference = broken / "reference.py"
    reference.write_text(
        reference.read_text().replace(
            '    gen = torch.Generator(device="cuda")', '    raise ValueError("no inputs today")'
        )
    )
    paths = [vadd / "v001.py", vadd / "v002.py", vadd / "v003.py", hist / "v001.py", hist / "v002.py"]
    paths += [native / "v001.py", native / "v002.py", broken / "v001.py"]
    # timeout: seconds per call into a version; generous, as a loaded 2-core machine runs the interpreter slowly
    results = judge_many(paths, timeout=60, rungs=["load", "correctness"], seeds=1)
    return {str(p.relative_to(ws)): results[str(p)] for p in paths}, ws


@pytest.mark.slow
def test_import_maps_the_format_onto_a_native_problem(judged: tuple[dict[str, dict], Path]) -> None:
    _, ws = judged
    problem = load_problem(ws / "vectoradd_py")
    assert problem.cases == [{"size": 1}, {"size": 1000}, {"size": 4097}]  # task.yml's seeds are the judge's now
    assert problem.bench_cases == [{"size": 65536}]
    assert problem.output_buffers == ((0, 2),)  # c: ref_kernel writes into it and returns it
    assert problem.version_files == ("task.py", "utils.py")
    assert problem.check is not None and not problem.has_tolerance
    (data,) = problem.make_inputs({"size": 10}, 5, torch.device("cpu"))  # generate_input asks for "cuda"
    assert isinstance(data, tuple) and [t.device.type for t in data] == ["cpu"] * 3
    (again,) = problem.make_inputs({"size": 10}, 5, torch.device("cpu"))
    (other,) = problem.make_inputs({"size": 10}, 6, torch.device("cpu"))
    assert torch.equal(data[0], again[0]) and not torch.equal(data[0], other[0])  # our seed is the one used
    hist = load_problem(ws / "histogram_py")
    (inputs,) = hist.make_inputs({"size": 50, "contention": 0}, 1, torch.device("cpu"))
    assert set(inputs) == {"values", "bins"} and hist.output_buffers == ()
    readme = (ws / "vectoradd_py" / "README.md").read_text()
    assert "| v002.py | solutions/wrong/last_block_missed.py | a wrong solution |" in readme
    assert (ws / "vectoradd_py" / "v001.py").read_text().startswith('"""GPU MODE solutions/correct/triton_add.py')


@pytest.mark.slow
def test_correct_solutions_pass_and_wrong_ones_fail_with_the_check_message(
    judged: tuple[dict[str, dict], Path],
) -> None:
    results, _ = judged
    for name in ("vectoradd_py/v001.py", "histogram_py/v001.py"):
        assert results[name]["status"] == "pass", [(r["name"], r["err"]) for r in results[name]["rungs"]]
    missed = rung(results["vectoradd_py/v002.py"], "correctness")
    assert missed["ok"] is False
    assert (
        "case size=4097" in missed["err"]
        and "the problem's check: output does not match the reference" in missed["err"]
    )
    hist = rung(results["histogram_py/v002.py"], "correctness")
    assert hist["ok"] is False and "the problem's check: bin counts differ in" in hist["err"]
    assert hist["metrics"]["max_abs"] > 0  # our figures, beside the check's verdict
    # c may be written; a is an input like any other
    into_a = rung(results["vectoradd_py/v003.py"], "correctness")
    assert into_a["ok"] is False and "modified its input 0[0] in place" in into_a["err"]


@pytest.mark.slow
def test_native_check_beside_the_tolerance_and_outputs_left_in_buffers(judged: tuple[dict[str, dict], Path]) -> None:
    results, _ = judged
    good = results["twice/v001.py"]
    assert good["status"] == "pass", [(r["name"], r["err"]) for r in good["rungs"]]
    assert rung(good, "correctness")["metrics"]["max_abs"] == 0.0
    hair = rung(results["twice/v002.py"], "correctness")
    assert hair["ok"] is False and hair["err"].endswith("the problem's check: not exactly twice x")


@pytest.mark.slow
def test_a_problem_whose_inputs_fail_is_the_problems_error(judged: tuple[dict[str, dict], Path]) -> None:
    results, _ = judged
    error = results["broken/vectoradd_py/v001.py"]["error"]
    assert (
        "vectoradd_py/problem.py" in error
        and "reference.py:15: generate_input raised ValueError: no inputs today" in error
    )


def test_import_refuses_what_is_not_a_gpumode_problem(tmp_path: Path) -> None:
    source = tmp_path / "src" / "vectoradd_py"
    shutil.copytree(GPUMODE / "vectoradd_py", source)
    shutil.copy(GPUMODE / "utils.py", source.parent / "utils.py")
    (source / "task.yml").unlink()
    done = kerneltui(
        "import", "gpumode", str(source), "--into", str(tmp_path / "ws"), "--files-root", str(source.parent)
    )
    assert done.returncode == 2 and "no task.yml" in done.stderr, done.stderr
    shutil.copy(GPUMODE / "vectoradd_py" / "task.yml", source / "task.yml")
    reference = source / "reference.py"
    reference.write_text(reference.read_text().replace("    c.copy_(a + b)", '    raise KeyError("c")'))
    with pytest.raises(WorkspaceError, match="the first test's inputs and reference failed here: 'c'"):
        import_problem(source, tmp_path / "ws", files_root=source.parent)
    reference.write_text(reference.read_text().replace("check_implementation = ", "check = "))
    with pytest.raises(WorkspaceError, match="defines no check_implementation"):
        import_problem(source, tmp_path / "ws2", files_root=source.parent)


def test_inputs_that_need_a_gpu_are_said_to(tmp_path: Path) -> None:
    source = tmp_path / "src" / "vectoradd_py"
    shutil.copytree(GPUMODE / "vectoradd_py", source)
    shutil.copy(GPUMODE / "utils.py", source.parent / "utils.py")
    reference = source / "reference.py"
    text = reference.read_text().replace("    return a, b, c", "    torch.cuda.synchronize()\n    return a, b, c")
    reference.write_text(text)
    folder = import_problem(source, tmp_path / "ws", files_root=source.parent)
    readme = (folder / "README.md").read_text()
    assert "it needs a GPU" in readme and "name them with --output-buffer" in readme
    problem = load_problem(folder)
    assert problem.output_buffers == ()
    if not torch.cuda.is_available():
        with pytest.raises(
            RuntimeError, match=r"reference\.py:\d+: generate_input raised .*needs a GPU to make its inputs"
        ):
            problem.make_inputs({"size": 4}, 1, torch.device("cpu"))


@pytest.mark.slow
def test_export_writes_a_submission(judged: tuple[dict[str, dict], Path], tmp_path: Path) -> None:
    _, ws = judged
    done = kerneltui("export", "vectoradd_py", "--format", "gpumode", "--version", "v001", "--workspace", str(ws))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (ws / "vectoradd_py" / "v001.py").read_text()  # it takes data already
    native = tmp_path / "ws" / "twice"
    native.mkdir(parents=True)
    (native / "problem.py").write_text(NATIVE_PROBLEM)
    (native / "sizes.py").write_text("BLOCK = 128\n")
    (native / "v001.py").write_text('"""Twice x into out."""\n\ndef custom_kernel(x, out):\n    out.copy_(x * 2)\n')
    (native / "v002.py").write_text('"""Twice, returned."""\n\ndef custom_kernel(x, out):\n    return x + x\n')
    workspace = Workspace(tmp_path / "ws")
    with pytest.raises(WorkspaceError, match="nothing judged or approved yet"):
        chosen_version(workspace, "twice", None)
    assert chosen_version(workspace, "twice", "1") == native / "v001.py"
    approved = kerneltui("approve", str(native / "v002.py"), "--force", "--reason", "checked by hand")
    assert approved.returncode == 0, approved.stderr
    best = chosen_version(workspace, "twice", None)
    assert best == native / "v002.py"
    namespace: dict = {}
    exec(compile(export_version(native, best), "submission.py", "exec"), namespace)
    x = torch.arange(4.0)
    assert torch.equal(namespace["custom_kernel"]((x, torch.empty(4))), x * 2)  # data: the inputs, as one tuple


def test_check_answers() -> None:
    for passed in (None, "", True, (True, ""), (True, "fine")):
        assert check_answer(passed, "p") is None
    assert check_answer("off by one", "p") == "off by one"
    assert check_answer((False, "off by one"), "p") == "off by one"
    assert check_answer((torch.tensor(False), "off by one"), "p") == "off by one"
    assert check_answer((torch.tensor(True), ""), "p") is None
    assert check_answer(False, "p") == "the problem's check failed"
    with pytest.raises(ProblemError, match=r"check in problem\.py returned a int"):
        check_answer(3, "p")


def test_output_buffers_may_change_and_nothing_else() -> None:
    data = {"x": torch.zeros(3), "out": torch.zeros(3)}
    written = {"x": torch.zeros(3), "out": torch.ones(3)}
    assert mutated_inputs([data], [written], skip=((0, "out"),)) is None
    assert "modified its input 0['out']" in str(mutated_inputs([data], [written]))
    resized = {"x": torch.zeros(3), "out": torch.ones(4)}
    assert "an output buffer" in str(mutated_inputs([data], [resized], skip=((0, "out"),)))
    both = {"x": torch.ones(3), "out": torch.ones(3)}
    assert "modified its input 0['x']" in str(mutated_inputs([data], [both], skip=((0, "out"),)))


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("output_buffers = 1", "output_buffers in problem.py must be a list"),
        ("output_buffers = [('a',)]", "output_buffers in problem.py must be a list"),
        ("version_files = ['nothere.py']", "version_files in problem.py names 'nothere.py'"),
        ("version_files = ['../problem.py']", "version_files in problem.py names '../problem.py'"),
        ("def check(output):\n    return None", "check must take (inputs, output)"),
        ("del tolerance", "missing tolerance"),
    ],
)
def test_bad_declarations_are_problem_errors(tmp_path: Path, line: str, words: str) -> None:
    folder = tmp_path / "twice"
    folder.mkdir()
    (folder / "sizes.py").write_text("BLOCK = 128\n")
    text = NATIVE_PROBLEM + "\n" + textwrap.dedent(line) + "\n"
    if line == "del tolerance":
        text = text.replace("\ndef check(inputs, output):", "\ndef _unused(inputs, output):")
    (folder / "problem.py").write_text(text)
    with pytest.raises(ProblemError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        load_problem(folder)


def test_the_dashboard_takes_a_check_for_the_tolerance(tmp_path: Path) -> None:
    """The watcher's quick look at problem.py: a check and no tolerance is a whole problem, neither is not."""
    from kerneltui.core.judging.custody import Custody, accept
    from kerneltui.core.judging.intake import Intake
    from kerneltui.history.store import Store

    folder = tmp_path / "twice"
    folder.mkdir()
    intake = Intake()
    intake.store = Store.open(tmp_path / "history.db").store
    intake.custody = Custody(Workspace(tmp_path))
    try:
        for text, error in (
            (NATIVE_PROBLEM.replace('tolerance = {"atol": 1e-6, "rtol": 1e-6}', ""), None),
            (
                NATIVE_PROBLEM.replace('tolerance = {"atol": 1e-6, "rtol": 1e-6}', "").replace("def check(", "def _c("),
                "problem.py is missing tolerance",
            ),
        ):
            (folder / "problem.py").write_text(text)
            accept(intake.store, intake.custody, "twice")  # the person's change, accepted: judged against
            intake._problem(folder, announce=False)
            assert [row["error"] for row in intake.store.problem_rows() if row["name"] == "twice"] == [error]
    finally:
        intake.store.close()


def test_output_buffers_must_name_tensors_of_the_inputs(tmp_path: Path) -> None:
    folder = tmp_path / "twice"
    folder.mkdir()
    (folder / "sizes.py").write_text("BLOCK = 128\n")
    (folder / "problem.py").write_text(
        NATIVE_PROBLEM.replace("output_buffers = [1]", "output_buffers = [1, 2, (0, 0)]")
    )
    problem = load_problem(folder)
    inputs = problem.make_inputs({"n": 3}, 1, torch.device("cpu"))
    with pytest.raises(ProblemError, match=r"output_buffers in problem\.py names \[2\], which make_inputs"):
        buffers_of(problem, inputs)
    problem.output_buffers = ((1,), (0, 0))  # an element of x: a float, not a tensor
    with pytest.raises(ProblemError, match=r"names \[0, 0\], a float, not a tensor"):
        buffers_of(problem, ((1.5,), torch.zeros(1)))


def test_case_values_are_task_yml_values_without_the_seed() -> None:
    task = {"tests": [{"m": [96, 128], "g": 2, "seed": 1}, {"m": [96, 128], "g": 2, "seed": 2}, {"g": 3, "seed": 3}]}
    assert _cases(task, "tests", Path("p")) == [{"m": [96, 128], "g": 2}, {"g": 3}]  # a seed apart: once
    with pytest.raises(WorkspaceError, match="not a number, a string, a bool or a list"):
        _cases({"tests": [{"shape": {"m": 1}}]}, "tests", Path("p"))
    with pytest.raises(WorkspaceError, match="tests is empty"):
        _cases({"tests": []}, "tests", Path("p"))


def test_output_buffers_found_where_the_reference_writes_or_named_by_hand(tmp_path: Path) -> None:
    source = tmp_path / "src" / "vectoradd_py"
    shutil.copytree(GPUMODE / "vectoradd_py", source)
    shutil.copy(GPUMODE / "utils.py", source.parent / "utils.py")
    (source / "solutions").rename(tmp_path / "solutions")  # no versions: only problem.py is looked at here
    reference = source / "reference.py"
    text = reference.read_text()
    reference.write_text(text.replace("    return c\n", "    return a + b\n", 1))  # written, not returned
    assert load_problem(import_problem(source, tmp_path / "ws", files_root=source.parent)).output_buffers == ((0, 2),)
    reference.write_text(text.replace("    c.copy_(a + b)\n    return c\n", "    return a + b\n", 1))  # neither
    neither = import_problem(source, tmp_path / "ws", name="v2", files_root=source.parent)
    assert load_problem(neither).output_buffers == ()
    said = (neither / "README.md").read_text()  # a and b are read by the reference: inputs, never suggested
    assert "data holds tensors of its shape (2)" in said and "--output-buffer 2 " in said, said
    by_hand = import_problem(source, tmp_path / "ws", name="v3", buffers=[parse_buffer("2")], files_root=source.parent)
    assert load_problem(by_hand).output_buffers == ((0, 2),)
    assert parse_buffer("1.out") == (0, 1, "out")
    with pytest.raises(WorkspaceError, match="give an index or a key of data"):
        parse_buffer("1..out")
