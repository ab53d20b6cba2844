"""Shape-only inputs (the compile rung's bench-sized cases with no GPU) cost the judge no import of torch._dynamo:
a seeded draw on the meta device went through torch's decompositions, whose first call imports it (about 2 s, and
77 MB the judge kept). Run in a fresh interpreter, as a judge starts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

PROBLEM = """
import torch

def reference(x, w):
    return x * w

def make_inputs(case, seed, device):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(case["rows"], case["cols"], generator=gen, dtype=torch.float32)
    w = torch.empty(case["cols"]).normal_(generator=gen)
    torch.nn.init.kaiming_uniform_(w.view(1, -1))
    ids = torch.randint(0, 10, (case["rows"],), generator=gen)
    return x.to(torch.bfloat16).to(device), w.to(device), ids.to(device)

cases = [{"rows": 3, "cols": 5}]
bench_cases = [{"rows": 65536, "cols": 65536}]
tolerance = {"atol": 1e-3, "rtol": 1e-3}

def cost(case):
    return {"flops": 0, "bytes": 4}
"""

SCRIPT = """
import json, sys
from pathlib import Path
from harness.problem.load import load_problem
from harness.judge.rungs.compile import _shapes_only
problem = load_problem(Path(sys.argv[1]))
inputs = _shapes_only(problem, problem.bench_cases[0], 7, data_first=False)
print(json.dumps({
    "inputs": [[str(t.device), list(t.shape), str(t.dtype)] for t in inputs],
    "dynamo": "torch._dynamo" in sys.modules,
}))
"""


def run_on_problem(script: str, tmp_path: Path) -> dict:
    """`script` in a fresh interpreter, as a judge starts, on PROBLEM: the JSON its last line prints."""
    folder = tmp_path / "scaled"
    folder.mkdir()
    (folder / "problem.py").write_text(textwrap.dedent(PROBLEM))
    done = subprocess.run(
        [sys.executable, "-c", script, str(folder)], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_seeded_draws_on_the_meta_device_import_no_dynamo(tmp_path: Path) -> None:
    found = run_on_problem(SCRIPT, tmp_path)
    assert found["inputs"] == [
        ["meta", [65536, 65536], "torch.bfloat16"],
        ["meta", [65536], "torch.float32"],
        ["meta", [65536], "torch.int64"],
    ]
    assert found["dynamo"] is False


WARMED = """
import json, sys
from pathlib import Path
from harness.problem import shapes_only
from harness.problem.load import load_problem
from harness.judge.rungs.compile import _shapes_only
shapes_only.warm()
problem = load_problem(Path(sys.argv[1]))
before = set(sys.modules)
_shapes_only(problem, problem.bench_cases[0], 7, data_first=False)
print(json.dumps({"imported": sorted(set(sys.modules) - before), "dynamo": "torch._dynamo" in sys.modules}))
"""


def test_a_judge_warmed_at_its_start_makes_its_first_shapes_with_no_import(tmp_path: Path) -> None:
    """On a GPU the judge now makes each version's bench cases shape-only too; the first draw's imports (torch's
    meta kernels and sympy: 0.4 s here) would fall inside the first version's verdict. A judge on a GPU
    pays them on a thread as it starts (harness.judge.serve)."""
    found = run_on_problem(WARMED, tmp_path)
    assert found["imported"] == [] and found["dynamo"] is False, found
