"""bf16 kernels run right in the Triton interpreter once harness.interpreter_fixes is installed."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run

KERNEL = """
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl
from harness import interpreter_fixes
assert interpreter_fixes.install()

@triton.jit
def bf16_math(x_ptr, y_ptr, out_ptr, dot_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)  # bf16, kept in bf16 on purpose
    y = tl.load(y_ptr + offs)
    z = x * y + x - tl.max(x, 0)
    tl.store(out_ptr + offs, z)
    rows = tl.arange(0, 16)
    a = tl.load(x_ptr + rows[:, None] * 16 + rows[None, :])
    b = tl.load(y_ptr + rows[:, None] * 16 + rows[None, :])
    tl.store(dot_ptr + rows[:, None] * 16 + rows[None, :], tl.dot(a, b))

x = torch.randn(256).to(torch.bfloat16)
y = torch.randn(256).to(torch.bfloat16)
out = torch.empty_like(x)
dot = torch.empty(16, 16)
bf16_math[(1,)](x, y, out, dot, BLOCK=256)
expected = ((x * y) + x - x.max()).float()
print("elementwise", float((out.float() - expected).abs().max()))
print("dot", float((dot - x.float().reshape(16, 16) @ y.float().reshape(16, 16)).abs().max()))
"""


def test_bf16_elementwise_reduction_and_dot(tmp_path: Path) -> None:
    script = tmp_path / "bf16_kernel.py"
    script.write_text(KERNEL)
    done = run([str(script)], env={"PYTHONPATH": str(Path(__file__).parent.parent)})
    assert done.returncode == 0, done.stderr[-3000:]
    values = dict(line.split() for line in done.stdout.splitlines())
    assert float(values["elementwise"]) < 0.1  # a bf16 ulp or two at these magnitudes
    assert float(values["dot"]) < 1e-3
