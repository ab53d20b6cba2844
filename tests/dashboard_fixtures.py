"""A workspace and a history with fixed content, for dashboard tests and snapshots."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from harness.contract.results import Evaluation, RungResult
from kerneltui.core.judging import runner
from kerneltui.core.workspace import Workspace
from kerneltui.history.store import Store
from tests.conftest import FIXTURES, VERSIONS

SASS = """\t.target\tsm_90a
//--------------------- .text.add_kernel --------------------------
add_kernel:
\t//## File "{path}", line 10
        /*0000*/                   LDC R1, c[0x0][0x28] ;                     /* 0x00000a00ff017b82 */
                                                                              /* 0x000fe20000000800 */
\t//## File "{path}", line 12
        /*0010*/                   LDG.E.128 R4, desc[UR6][R2.64] ;           /* 0x0000000602047981 */
        /*0020*/                   LDG.E.128 R8, desc[UR6][R2.64+0x200] ;     /* 0x0000020602087981 */
        /*0030*/                   FADD R4, R4, R8 ;                          /* 0x0000000804047221 */
        /*0040*/                   STG.E.128 desc[UR6][R2.64], R4 ;           /* 0x0000000402007986 */
        /*0050*/                   EXIT ;                                     /* 0x000000000000794d */
"""


def rungs_for(status: str, median_us: float | None, note_dir: Path) -> list[RungResult]:
    kernels = [
        {
            "name": "add_kernel",
            "dsl": "triton",
            "case": "n=16777216",
            "registers": 26,
            "spill_bytes": 0,
            "shared": 0,
            "num_warps": 4,
            "num_stages": 3,
        }
    ]
    load = RungResult("load", ok=True, seconds=0.02, metrics={"dsls": ["triton"], "notes": "", "warnings": []})
    compile_ = RungResult(
        "compile", ok=True, seconds=0.81, metrics={"mode": "jit", "arch": "sm_90", "kernels": kernels}
    )
    if status == "fail":
        wrong = RungResult(
            "correctness",
            ok=False,
            seconds=0.4,
            err="case n=4097 (seed 1234): output: 1 of 4097 elements (0.0244%) outside atol 1e-06 + "
            "rtol 1e-06·|ref| (max abs error 1.84); first at [4096] got 0 expected -1.84251",
            metrics={"mode": "cuda", "n_cases": 4, "n_seeds": 2, "cases": []},
        )
        return [
            load,
            compile_,
            wrong,
            RungResult.skip("benchmark", "correctness failed"),
            RungResult.skip("roofline", "benchmark failed"),
            RungResult.skip("dumps", "compile failed"),
        ]
    correctness = RungResult(
        "correctness",
        ok=True,
        seconds=0.4,
        metrics={
            "mode": "cuda",
            "n_cases": 4,
            "n_seeds": 2,
            "max_abs": 0.0,
            "max_rel": 0.0,
            "mse": 0.0,
            "rmse": 0.0,
            "psnr": None,
            "cosine": 1.0,
            "cases": [
                {
                    "case": "n=4097",
                    "seed": 1234,
                    "ok": True,
                    "err": None,
                    "max_abs": 0.0,
                    "max_rel": 0.0,
                    "mse": 0.0,
                    "rmse": 0.0,
                    "psnr": None,
                    "cosine": 1.0,
                }
            ],
        },
    )
    assert median_us is not None
    bench = RungResult(
        "benchmark",
        ok=True,
        seconds=1.9,
        metrics={
            "median_us": median_us,
            "speedup": 40.0 / median_us,
            "ref_median_us": 40.0,
            "cases": [
                {
                    "case": "n=16777216",
                    "median_us": median_us,
                    "p20_us": median_us * 0.99,
                    "p80_us": median_us * 1.01,
                    "min_us": median_us * 0.98,
                    "n": 500,
                    "noise_pct": 0.4,
                    "ref_median_us": 40.0,
                    "speedup": 40.0 / median_us,
                }
            ],
        },
    )
    floor = 201326592 / 4234e9 * 1e6
    roof = RungResult(
        "roofline",
        ok=True,
        metrics={
            "pct": 100 * floor / median_us,
            "gbps": 201326592 / median_us / 1e3,
            "tflops": 0.1,
            "cases": [
                {
                    "case": "n=16777216",
                    "bytes": 201326592,
                    "flops": 16777216,
                    "gbps": 201326592 / median_us / 1e3,
                    "tflops": 0.1,
                    "floor_us": floor,
                    "pct": 100 * floor / median_us,
                    "bound": "memory",
                    "flops_peak_tflops": 51.2,
                }
            ],
            "peaks": {"copy_gbps": 4234.0, "bf16_tflops": 801.0, "fp32_tflops": 51.2, "datasheet": None},
        },
    )
    sass = note_dir / "add_kernel.sass"
    dumps = RungResult(
        "dumps",
        ok=True,
        metrics={
            "dir": str(note_dir),
            "kinds": ["sass"],
            "kernels": [{**kernels[0], "kernel": "add_kernel", "constexprs": {"BLOCK": 1024}}],
            "files": [
                {
                    "kernel": "add_kernel",
                    "dsl": "triton",
                    "kind": "sass",
                    "path": str(sass),
                    "bytes": 1,
                    "case": "n=16777216",
                }
            ],
        },
    )
    return [load, compile_, correctness, bench, roof, dumps]


def build(root: Path) -> Workspace:
    """vadd with v001 (pass, 120 µs), v002 (pass, 52 µs, best), v003 (fail) and v004 (queued)."""
    if root.exists():
        shutil.rmtree(root)
    folder = root / "vadd"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "vadd" / "problem.py", folder / "problem.py")
    workspace = Workspace(root)
    opened = Store.open(workspace.db_path)
    store = opened.store
    good = (VERSIONS / "good.py").read_text()
    plans = [
        ("v001", good.replace("BLOCK 1024.", "BLOCK 1024, one warp [first try]."), "pass", 120.0),
        ("v002", good.replace("BLOCK 1024.", "BLOCK 4096 and 8 warps."), "pass", 52.0),
        ("v003", (VERSIONS / "pow2_only.py").read_text(), "fail", None),
        ("v004", good.replace("BLOCK 1024.", "Two blocks per program."), "queued", None),
    ]
    for name, text, status, median in plans:
        judged(store, workspace, folder / f"{name}.py", text, status, median)
    add_agent_session(store)
    store.close()
    return workspace


def judged(
    store: Store,
    workspace: Workspace,
    path: Path,
    text: str,
    status: str,
    median: float | None,
    gpu: str = "NVIDIA H200",
) -> None:
    """A version written and judged (or only queued) on one GPU, as the scheduler records it."""
    path.write_text(text)
    version_id, digest, problem = runner.record_version(store, workspace, path)
    evaluation_id = store.start_evaluation(version_id, problem, path.stem, digest, status="queued")
    if status == "queued":
        return
    dumps_dir = workspace.state / "dumps" / problem / path.stem / digest[:12]
    dumps_dir.mkdir(parents=True, exist_ok=True)
    (dumps_dir / "add_kernel.sass").write_text(SASS.format(path=path))
    ev = Evaluation(
        problem=problem,
        version=path.stem,
        path=str(path),
        hash=digest,
        device={"kind": "cuda", "name": gpu, "arch": "sm_80" if "A100" in gpu else "sm_90"},
        rungs=rungs_for(status, median, dumps_dir),
        sandbox="landlock ABI 7",
        problem_hash=hashlib.sha256((path.parent / "problem.py").read_bytes()).hexdigest(),  # as the judge sets it
    )
    ev.finish()
    store.finish_evaluation(evaluation_id, ev)


def add_agent_session(store: Store) -> None:
    """A finished session's transcript: what the Agent pane shows."""
    session = store.start_agent_session("vadd", "claude", "claude-opus-4-6", 0)
    events = [
        ("start", "claude-opus-4-6 on vadd", {}),
        ("turn", "turn 1", {"turn": 1, "total_cost_usd": 0.03}),
        ("text", "A masked add with BLOCK 1024 first: 12 bytes per element, so copy bandwidth is the ceiling.", {}),
        ("tool_call", 'write_version "BLOCK 1024 [first try]"', {"tool": "write_version"}),
        ("tool_result", "v001: pass\n✓ load", {"tool": "write_version", "ok": True, "status": "pass"}),
        ("feedback", "- Guidance from the person: use 8 warps", {"count": 1}),
        ("tool_call", "read_dump version=v002 kind=sass grep=LDG", {"tool": "read_dump"}),
        ("tool_result", "2 matching lines\n  LDG.E.128\n  LDG.E.128", {"tool": "read_dump", "ok": True}),
        ("tool_call", 'write_version "no tail mask"', {"tool": "write_version"}),
        (
            "tool_result",
            "v003: fail (failed at correctness)\n✓ load\n✗ correctness  0.40 s   case n=4097: 1 of 4097 "
            "elements outside atol",
            {"tool": "write_version", "ok": True, "status": "fail"},
        ),
        ("retry", "attempt 1 failed (API error 529: Overloaded); trying again in 5 s", {}),
        ("stop", "wrote 3 versions (the budget)", {}),
    ]
    for kind, text, data in events:
        store.add_agent_event(session, "vadd", kind, text, data)
    store.update_agent_session(
        session, versions=3, turns=3, cost_usd=0.41, ended="x", stop_reason="wrote 3 versions (the budget)"
    )
