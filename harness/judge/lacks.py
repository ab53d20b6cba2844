"""A version that needs what this box lacks is not verified here, which is not the same as wrong: building an inline
CUDA extension with no CUDA toolkit, or running kernels built for another GPU architecture. Its load or first call
fails with words the toolchain prints; those become a skip that says what is missing (the evaluation `unverified`),
never a failure the agent would be told to fix. A version can print these words itself: it then earns `unverified`,
which is never a pass."""

from __future__ import annotations

import re

NEEDS = (
    (
        re.compile(
            r"CUDA_HOME environment variable is not set|No such file or directory: '[^']*nvcc'|nvcc: not found"
            r"|nvcc: command not found|Could not find nvcc"
        ),
        "the CUDA toolkit (nvcc), to build its CUDA extension",
    ),
    (
        re.compile(r"no kernel image is available for execution on the device|CUDA_ERROR_NO_BINARY_FOR_GPU"),
        "a GPU of the architecture its kernels were built for",
    ),
)


NOT_VERIFIED = "not verified here:"


def lacking(error: str | None) -> str | None:
    """What this box lacks that `error` says the version needs, as a skip's reason; None: an ordinary failure."""
    for words, needed in NEEDS:
        if error and words.search(error):
            return f"{NOT_VERIFIED} it needs {needed}, which this box lacks ({error.splitlines()[0][:200]})"
    return None
