"""What a kernel is called, read where both processes need it: a CUDA source's kernels (TileLang's generated source,
read in the worker and in the judge) and the names the judge accepts from what a worker wrote."""

from __future__ import annotations

import re

CUDA_KERNEL = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(")
KERNEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,200}")
