"""kernels/rmsnorm/v003.py (CuTeDSL) cannot run here, so its tiling is checked on the host: for every width the
problem asks for (and a sweep of others), the shape class it picks makes its threads cover each element of a
row exactly once, keeps a resident row to one pass, and stays within a CTA's limits."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest
import torch

from tests.conftest import REPO

pytest.importorskip("cutlass.cute")


def load(relative: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(relative.replace("/", "_").removesuffix(".py"), REPO / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def version() -> ModuleType:
    return load("kernels/rmsnorm/v003.py")


@pytest.fixture(scope="module")
def problem() -> ModuleType:
    return load("kernels/rmsnorm/problem.py")


def covered(version: ModuleType, cols: int, vec: int) -> torch.Tensor:
    """How many times the kernel's threads touch each element of one row, with its own index arithmetic:
    thread t of chunk c handles vector c * THREADS * PER_THREAD + k * THREADS + t for k < PER_THREAD, if that
    is below nvec; vector j is elements j * vec .. j * vec + vec - 1."""
    threads, per_thread, _ = version.shape_class(cols, vec)
    nvec = cols // vec
    nchunks = -(-nvec // (threads * per_thread))
    c = torch.arange(nchunks).view(-1, 1, 1)
    k = torch.arange(per_thread).view(1, -1, 1)
    t = torch.arange(threads).view(1, 1, -1)
    j = (c * threads * per_thread + k * threads + t).flatten()
    j = j[j < nvec]
    elements = (j.view(-1, 1) * vec + torch.arange(vec)).flatten()
    return torch.bincount(elements, minlength=cols)


def widths(problem: ModuleType) -> list[int]:
    asked = {case["cols"] for case in problem.cases + problem.bench_cases}
    return sorted(asked | set(range(1, 300)) | set(range(4090, 4110)) | {32767, 32768, 32769, 65536, 70001, 1 << 20})


def test_every_element_of_a_row_is_handled_exactly_once(version: ModuleType, problem: ModuleType) -> None:
    for cols in widths(problem):
        for vec in (1, 8) if cols % 8 == 0 else (1,):
            counts = covered(version, cols, vec)
            assert counts.numel() == cols and bool((counts == 1).all()), (cols, vec, version.shape_class(cols, vec))


def test_shape_classes_fit_a_cta_and_resident_rows_take_one_pass(version: ModuleType, problem: ModuleType) -> None:
    for cols in widths(problem):
        for vec in (1, 8) if cols % 8 == 0 else (1,):
            threads, per_thread, resident = version.shape_class(cols, vec)
            assert threads % 32 == 0 and 32 <= threads <= 1024 and per_thread >= 1
            nvec = cols // vec
            if resident:
                assert threads * per_thread >= nvec and per_thread <= version.MAX_RESIDENT[vec > 1]
            else:
                assert threads == 1024 and threads * version.MAX_RESIDENT[vec > 1] < nvec


def test_the_bench_cases_are_vectorised_and_resident(version: ModuleType, problem: ModuleType) -> None:
    """128-bit accesses for the widths that are timed, and x read once: the point of this version."""
    for case in problem.bench_cases:
        x, w = problem.make_inputs(dict(case, rows=2), 0, "cpu")
        assert case["cols"] % 8 == 0 and all(t.data_ptr() % 16 == 0 for t in (x, w))
        threads, per_thread, resident = version.shape_class(case["cols"], 8)
        assert resident and per_thread <= 4, (threads, per_thread)
