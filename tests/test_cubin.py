"""A cubin's resource usage read from its own sections: what cuobjdump says, spills seen, hostile bytes refused."""

from __future__ import annotations

import random
import re
import subprocess
from pathlib import Path

import pytest

from harness.judge import artifacts
from harness.judge.artifacts import Kernel, find_tool, read_resources
from harness.judge.cubin import resource_usage

SMALL, SPILLING = 1024, 8192  # floats a program: 8 a thread in 4 warps; 256 a thread in one warp (past 255 registers)


def _compile(folder: Path, block: int, warps: int) -> Kernel:
    """A real Triton kernel compiled for sm_90 (no GPU needed): a scan over BLOCK floats."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def scan(x_ptr, y_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offsets)
        tl.store(y_ptr + offsets, tl.cumsum(x * x, 0) + x)

    source = ASTSource(
        fn=scan, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "BLOCK": "constexpr"}, constexprs={"BLOCK": block}
    )
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 64), options={"num_warps": warps})
    files = {"cubin": folder / f"scan{block}.cubin", "ptx": folder / f"scan{block}.ptx"}
    files["cubin"].write_bytes(compiled.asm["cubin"])
    files["ptx"].write_text(compiled.asm["ptx"])
    return Kernel(name="scan", dsl="triton", files=files)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Kernel]:
    folder = tmp_path_factory.mktemp("cubins")
    return {SMALL: _compile(folder, SMALL, 4), SPILLING: _compile(folder, SPILLING, 1)}


@pytest.mark.parametrize("block", [SMALL, SPILLING])
def test_the_cubins_own_sections_say_what_cuobjdump_says(kernels: dict[int, Kernel], block: int) -> None:
    cuobjdump = find_tool("cuobjdump")
    assert cuobjdump is not None, "Triton's wheel carries cuobjdump (backends/nvidia/bin): the judge finds it there"
    cubin = kernels[block].files["cubin"]
    text = subprocess.run([cuobjdump, "--dump-resource-usage", str(cubin)], capture_output=True, text=True).stdout
    said = dict(re.findall(r"\b(REG|STACK|SHARED|LOCAL):(\d+)", text))
    found = resource_usage(cubin.read_bytes())
    assert found is not None and set(found) == {"scan"}
    usage = found["scan"]
    assert (usage["registers"], usage["stack_bytes"], usage["smem_bytes"], usage["local_bytes"]) == tuple(
        int(said[field]) for field in ("REG", "STACK", "SHARED", "LOCAL")
    )


def test_resources_are_read_with_no_tool_started(kernels: dict[int, Kernel], monkeypatch: pytest.MonkeyPatch) -> None:
    def no_tool(*_: object) -> tuple[int, str]:
        raise AssertionError("a tool was started for a cubin that parses")

    monkeypatch.setattr(artifacts, "_run_tool", no_tool)
    kernel = Kernel(name="scan", dsl="triton", files={"cubin": kernels[SMALL].files["cubin"]})
    read_resources(kernel)
    assert kernel.resources["registers"] > 0 and kernel.resources["spill_bytes"] == 0


def test_a_kernel_that_spills_is_reported_spilling(kernels: dict[int, Kernel]) -> None:
    """cuobjdump's LOCAL reads 0 for it (only declared local arrays count there): its spills sit in the frame."""
    kernel = Kernel(name="scan", dsl="triton", files=dict(kernels[SPILLING].files))
    read_resources(kernel)
    assert kernel.resources["registers"] == 255
    assert kernel.resources["spill_bytes"] > 0, kernel.resources


def test_a_spilling_kernel_with_no_ptxas_to_count_reports_its_frame(
    kernels: dict[int, Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(artifacts, "find_tool", lambda name: None)
    kernel = Kernel(name="scan", dsl="triton", files=dict(kernels[SPILLING].files))
    read_resources(kernel)
    assert kernel.resources["spill_bytes"] > 0 and kernel.resources["spills_from"] == "frame"


def test_hostile_bytes_give_no_figures_and_no_error(kernels: dict[int, Kernel]) -> None:
    """Truncated, corrupted or crafted: the reader returns None or what it could read, never raises or loops."""
    good = kernels[SMALL].files["cubin"].read_bytes()
    draw = random.Random(34)
    crafted = [b"", b"\x7fELF", good[: len(good) // 2], good[:0x40] + b"\xff" * 64, b"\x7fELF\x02\x01" + b"\xff" * 200]
    for _ in range(3000):
        mutated = bytearray(good)
        headers = min(len(good), 0x40 + 64 * 16)  # most flips in the ELF and section headers, where offsets lie
        for _ in range(draw.randint(1, 8)):
            mutated[draw.randrange(headers if draw.random() < 0.7 else len(good))] = draw.randrange(256)
        crafted.append(bytes(mutated))
    for data in crafted:
        found = resource_usage(data)
        assert found is None or all(isinstance(v, int) and v >= 0 for usage in found.values() for v in usage.values())
