"""How fast the context index builds over installed DSL sources, and what it finds for kernel identifiers.

    python benchmarks/context_index.py [--context DIR]

Indexes the installed triton and cutlass (nvidia-cutlass-dsl) and tilelang, whichever are installed, plus a
context folder (default: the shipped one), into a scratch index file; then indexes again with nothing changed,
and prints the top hit for a few identifiers.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agents.context_index import ContextIndex, package_roots  # noqa: E402

QUERIES = ("make_tiled_copy", "TiledMma", "tl.dot", "wgmma", "T.gemm")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", default=str(REPO / "context"), help="the context folder (default: shipped)")
    args = parser.parse_args()
    roots = package_roots()
    print("packages: " + (", ".join(f"{name} ({root})" for name, root in roots.items()) or "none installed"))
    with tempfile.TemporaryDirectory() as scratch:
        index = ContextIndex(Path(scratch) / "index.sqlite", Path(args.context), packages=True)
        first = index.refresh()
        print(f"first index: {first.seconds:.2f} s; {first.summary()}")
        again = index.refresh()
        print(f"re-index, nothing changed: {again.seconds:.3f} s ({again.rechunked} files chunked)")
        for query in QUERIES:
            began = time.monotonic()
            hits = index.search(query, 1)
            took = (time.monotonic() - began) * 1000
            print(f"{query:>16}: {hits[0].where + '  ' + hits[0].name if hits else 'no hit'}  ({took:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
