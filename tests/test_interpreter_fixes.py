"""bf16 kernels run right in the Triton interpreter once harness.worker.interpreter_fixes is installed."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run

KERNEL = """
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl
from harness.worker import interpreter_fixes
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


TF32 = """
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl
from harness.worker import interpreter_fixes
assert interpreter_fixes.install()

@triton.jit
def fp32_dot(a_ptr, b_ptr, out_ptr, PRECISION: tl.constexpr):
    rows = tl.arange(0, 32)
    a = tl.load(a_ptr + rows[:, None] * 32 + rows[None, :])
    b = tl.load(b_ptr + rows[:, None] * 32 + rows[None, :])
    tl.store(out_ptr + rows[:, None] * 32 + rows[None, :], tl.dot(a, b, input_precision=PRECISION))

gen = torch.Generator().manual_seed(0)
a, b = torch.randn(32, 32, generator=gen), torch.randn(32, 32, generator=gen)
exact = a.double() @ b.double()
truncated = lambda t: (t.view(torch.int32) & ~0x1FFF).view(torch.float32).double()
for precision in ("tf32", "tf32x3", "ieee"):
    out = torch.empty(32, 32)
    fp32_dot[(1,)](a, b, out, PRECISION=precision)
    print(precision, float((out.double() - exact).abs().max()),
          float((out.double() - truncated(a) @ truncated(b)).abs().max()))
"""


def test_fp32_dot_at_tf32_loses_what_the_gpus_tensor_cores_lose(tmp_path: Path) -> None:
    """tl.dot on fp32 inputs runs at TF32 by default on the GPU: the interpreter computed in full fp32, so a
    version whose tolerance holds only at fp32 passed with no GPU and failed on one."""
    script = tmp_path / "tf32_kernel.py"
    script.write_text(TF32)
    done = run([str(script)], env={"PYTHONPATH": str(Path(__file__).parent.parent)})
    assert done.returncode == 0, done.stderr[-3000:]
    errors = {line.split()[0]: (float(line.split()[1]), float(line.split()[2])) for line in done.stdout.splitlines()}
    assert errors["tf32"][0] > 1e-3 and errors["tf32"][1] < 1e-4  # TF32's 10-bit mantissa, as the hardware reads it
    assert errors["tf32x3"][0] < 1e-4 and errors["ieee"][0] < 1e-4
