"""The task an agent is given: the problem as written, how versions are judged, where the context is."""

from __future__ import annotations

from pathlib import Path

from agents.base import ProblemInfo
from agents.context_index import package_roots

SYSTEM = """\
You are a GPU kernel engineer. You write fast, correct kernels in Triton or CuTeDSL (nvidia-cutlass-dsl) \
for a problem defined by a slow torch reference, and you iterate until the kernel is close to the \
hardware's roofline.

Every version you write is judged by a verification ladder in an isolated process: load (import, find \
custom_kernel), compile (registers, spills, shared memory), correctness against the reference on every \
case with fresh secret seeds (max abs/rel error, MSE, PSNR, cosine similarity; NaN/Inf; inputs must be \
left unchanged), benchmark (the event time: CUDA events, L2 flushed, median; over copies of the inputs \
at several places in memory, the mean of their medians), roofline (achieved bytes/s and FLOP/s \
against the device's measured peaks) and dumps (PTX, SASS, TTGIR...). Results you cannot get any other \
way: do not try to detect the judge, special-case the test shapes, cache outputs between calls or read \
the reference's results; such versions fail, and a person reviews every version.

Work in small steps: one idea per version, with notes that say what changed and why. Read the ladder's \
result before the next version; when a version fails, fix the cause it names. Use read_dump to check \
what the compiler made of your code (wide loads, spills, the instructions you meant), and profile to see \
where a passing version's time goes (Nsight Compute: bandwidth, throughput, occupancy); sanitize runs \
compute-sanitizer over a version for what one correct call hides (out-of-bounds reads, shared-memory races, \
reads of memory never written). A person watches \
and may send guidance or reject a version with a reason: follow it.
"""


MAX_NOTES_LISTED = 16


def context_text(problem: ProblemInfo) -> str:
    """Where the context is, and the notes it holds by name: an agent on CuTeDSL writes good first versions
    only when it reads about layouts, copy and MMA atoms first."""
    if not problem.context:
        return "There is no context folder for this problem."
    text = (
        f"A context folder ({problem.context}) holds DSL docs, sources and notes: search_context and read_file read it."
    )
    notes = sorted(p.relative_to(problem.context).as_posix() for p in (problem.context / "notes").glob("*.md"))
    if notes:
        listed = ", ".join(notes[:MAX_NOTES_LISTED]) + (", ..." if len(notes) > MAX_NOTES_LISTED else "")
        text += f" Its notes ({listed}) are short and point into the DSLs' sources: read the ones for your DSL first."
    sources = dsl_sources(problem.context)
    if sources:
        text += " Where each DSL's sources are, as search_context and read_file name them: " + "; ".join(sources) + "."
    return text


# Where a checkout fetched into the context keeps what an agent writing that DSL reads first.
CHECKOUT_GUIDES = {
    "cutlass": ("examples/python/CuTeDSL", "python/CuTeDSL", "include/cute", "media/docs"),
    "triton": ("python/tutorials", "python/triton/language"),
    "tilelang": ("examples", "tilelang/language"),
}
INSTALLED = {"cutlass": "CuTeDSL (nvidia-cutlass-dsl)", "triton": "Triton", "tilelang": "TileLang"}


def dsl_sources(context: Path) -> list[str]:
    """CUTLASS first (CuTeDSL's layouts, atoms and examples are what a first CuTeDSL version needs): checkouts
    fetched into the context folder, with the folders worth reading, then the installed packages' sources."""
    found = []
    for name, guides in CHECKOUT_GUIDES.items():
        checkout = context / name
        if checkout.is_dir():
            inside = [f"{name}/{g}" for g in guides if (checkout / g).is_dir()]
            found.append(f"a {name} checkout in {name}/" + (f" ({', '.join(inside)})" if inside else ""))
    roots = package_roots(tuple(INSTALLED))
    found += [f"the installed {INSTALLED[name]} as site/{name}/" for name in INSTALLED if name in roots]
    return found


# how a problem.py `kerneltui import kernelbench` wrote loads its KernelBench file, now and before
KERNELBENCH_IMPORTS = (
    "from harness.problem import kernelbench",
    "from harness import kernelbench",
    "harness.kernelbench",
)


def model_new(problem: ProblemInfo) -> str:
    """KernelBench problems also take their own form of a version, which their solutions are written in."""
    if not any(form in problem.source for form in KERNELBENCH_IMPORTS):
        return ""
    return (
        " This problem comes from KernelBench: a version may instead define `ModelNew`, an nn.Module built like the "
        "problem's Model (its weights are loaded from the reference model's)."
    )


def task_prompt(problem: ProblemInfo) -> str:
    context = context_text(problem)
    return f"""\
Problem: {problem.name} (folder {problem.folder}).

Its problem.py, which defines the reference, the inputs, the correctness cases (cases), the timed cases \
(bench_cases), the tolerance and the cost model used for the roofline:

```python
{problem.source.rstrip()}
```

Write versions with write_version: each is a whole Python module defining `custom_kernel(*inputs)`, \
taking what `make_inputs` returns and returning what `reference` returns (same shape, dtype and device). \
Its docstring holds your notes. The ladder's result comes back from write_version.{model_new(problem)} {context}

Start with a simple correct version, then make it faster.
"""
