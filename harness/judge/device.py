"""The device the ladder runs on, and its ceilings: measured copy bandwidth and matrix rates.

Peaks are measured once per device and driver (a large device-to-device copy, counting bytes read
and written; large bf16 and fp32 matrix products) and cached in the workspace's state folder.
Datasheet figures are kept beside them for reference, never used as the ceiling.
"""

from __future__ import annotations

import functools
import json
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

# Dense rates from vendors' datasheets (SXM parts unless named): GB/s, TFLOP/s. The physical limit an honest
# kernel cannot pass; the measured ceilings are what % of roofline is taken against.
DATASHEETS: dict[str, dict[str, float]] = {
    "H200": {"bandwidth_gbps": 4800, "fp8_tflops": 1979, "bf16_tflops": 989, "fp16_tflops": 989, "tf32_tflops": 494,
             "fp32_tflops": 67},
    "H100 PCIe": {"bandwidth_gbps": 2000, "fp8_tflops": 1513, "bf16_tflops": 756, "fp16_tflops": 756,
                  "tf32_tflops": 378, "fp32_tflops": 51},
    "H100": {"bandwidth_gbps": 3350, "fp8_tflops": 1979, "bf16_tflops": 989, "fp16_tflops": 989, "tf32_tflops": 494,
             "fp32_tflops": 67},
    "A100-SXM4-80GB": {"bandwidth_gbps": 2039, "bf16_tflops": 312, "fp16_tflops": 312, "tf32_tflops": 156,
                       "fp32_tflops": 19.5},
    "A100": {"bandwidth_gbps": 1555, "bf16_tflops": 312, "fp16_tflops": 312, "tf32_tflops": 156, "fp32_tflops": 19.5},
    "L40S": {"bandwidth_gbps": 864, "fp8_tflops": 733, "bf16_tflops": 362, "fp16_tflops": 362, "tf32_tflops": 183,
             "fp32_tflops": 91.6},
    "RTX 4090": {"bandwidth_gbps": 1008, "fp8_tflops": 330, "bf16_tflops": 165, "fp16_tflops": 165,
                 "tf32_tflops": 82.6, "fp32_tflops": 82.6},
    "B200": {"bandwidth_gbps": 8000, "fp8_tflops": 4500, "bf16_tflops": 2250, "fp16_tflops": 2250,
             "tf32_tflops": 1100, "fp32_tflops": 80},
}  # fmt: skip
PEAKS_SCHEMA = 4  # measured ceilings cached under an older schema (4: timed rested) are measured again
BANDWIDTHS = ("copy", "stream", "read")  # 1 read : 1 write, 2 reads : 1 write, reads only
# The matrix units a problem's precision may use: the highest measured of them is its ceiling (an fp32 problem
# may be computed with TF32 where its tolerance allows: Triton's tl.dot does by default).
MATMULS = {"fp8": ("fp8", "fp16", "bf16"), "bf16": ("bf16",), "fp16": ("fp16",), "fp32": ("tf32", "fp32")}


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def describe() -> dict[str, Any]:
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "triton": package_version("triton"),
        "cutedsl": package_version("nvidia-cutlass-dsl"),
        "tilelang": package_version("tilelang"),
        "python": platform.python_version(),
    }
    if not torch.cuda.is_available():
        return {"kind": "cpu", "name": f"CPU ({platform.machine()}), no GPU", **info}
    props = torch.cuda.get_device_properties(0)
    return {
        "kind": "cuda",
        "name": props.name,
        "arch": f"sm_{props.major}{props.minor}",
        "sms": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "l2_mib": round(getattr(props, "L2_cache_size", 0) / 2**20, 1),
        "cuda": torch.version.cuda,
        "driver": _driver_version(),
        **info,
    }


def _driver_version() -> str | None:
    try:
        import ctypes

        version = ctypes.c_int()
        ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version))
        return f"{version.value // 1000}.{version.value % 1000 // 10}"
    except OSError:
        return None


def datasheet(name: str) -> dict[str, float] | None:
    for key, figures in DATASHEETS.items():
        if key.lower() in name.lower():
            return figures
    return None


def peaks_key(device: dict[str, Any]) -> str:
    return f"{device.get('name')}|{device.get('driver')}|{device.get('torch')}|v{PEAKS_SCHEMA}"


def peaks(device: dict[str, Any], cache_dir: Path | None) -> dict[str, Any]:
    """Measured ceilings for this device, from the cache when it has them."""
    key = peaks_key(device)
    cache = cache_dir / "device-peaks.json" if cache_dir else None
    known: dict[str, Any] = {}
    if cache and cache.is_file():
        try:
            known = json.loads(cache.read_text())
        except (OSError, json.JSONDecodeError):
            known = {}
    if key not in known:
        known[key] = measure_peaks()
        if cache:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps(known, indent=1))
    result = dict(known[key])
    result["datasheet"] = datasheet(str(device.get("name", "")))
    return result


def bandwidth_ceiling(peaks: dict[str, Any]) -> tuple[str, float]:
    """The highest measured bandwidth (name, GB/s): a kernel's read:write mix is not known, and a ceiling an
    honest kernel can pass is no ceiling."""
    measured = {name: float(peaks[f"{name}_gbps"]) for name in BANDWIDTHS if peaks.get(f"{name}_gbps")}
    name = max(measured, key=lambda n: measured[n])
    return name, measured[name]


def matmul_ceiling(peaks: dict[str, Any], precision: str) -> tuple[str, float]:
    """The highest measured matrix rate (name, TFLOP/s) a problem of this precision may use."""
    usable = MATMULS.get(precision, MATMULS["fp32"])
    measured = {name: float(peaks[f"{name}_tflops"]) for name in usable if peaks.get(f"{name}_tflops")}
    if not measured:
        return "fp32", float(peaks["fp32_tflops"])
    name = max(measured, key=lambda n: measured[n])
    return name, measured[name]


def _median_ms(fn: Any, flush: torch.Tensor) -> float:
    from harness.gpu import timing

    return timing.summarize(timing.time_calls(fn, flush, budget_s=0.5)).median_us / 1e3


def _bandwidths(flush: torch.Tensor, n: int = 1 << 28, device: str = "cuda") -> dict[str, Any]:
    """GB/s of a 1 GiB copy, a two-reads-one-write add over 1 GiB operands and a read-only sum of 1 GiB (n
    float32s), each the fastest of torch's op and plain Triton kernels of a few block sizes (`<name>_by` says
    which)."""
    from harness.judge import stream_kernels  # imports triton: only where ceilings are measured

    a = torch.rand(n, device=device)
    b, c = torch.rand_like(a), torch.empty_like(a)
    moved = {"copy": 2 * 4 * n, "stream": 3 * 4 * n, "read": 4 * n}
    found: dict[str, Any] = {}
    for name, ways in stream_kernels.calls(a, b, c).items():
        rates = {how: moved[name] / (_median_ms(call, flush) * 1e-3) / 1e9 for how, call in ways.items()}
        found[f"{name}_by"], found[f"{name}_gbps"] = fastest(rates)
    return found


def fastest(rates: dict[str, float]) -> tuple[str, float]:
    """(label, rate) of the highest rate."""
    label = max(rates, key=lambda k: rates[k])
    return label, rates[label]


def _matmul_rates(flush: torch.Tensor) -> dict[str, float]:
    """TFLOP/s of large torch matmuls: bf16, fp16, TF32 and fp32 (8192³, fp32 4096³), fp8 where supported."""
    rates: dict[str, float] = {}
    allowed = torch.backends.cuda.matmul.allow_tf32
    try:
        for label, dtype, n, tf32 in (
            ("bf16", torch.bfloat16, 8192, False),
            ("fp16", torch.float16, 8192, False),
            ("tf32", torch.float32, 8192, True),
            ("fp32", torch.float32, 4096, False),
        ):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a, b = torch.randn(n, n, device="cuda", dtype=dtype), torch.randn(n, n, device="cuda", dtype=dtype)
            rates[f"{label}_tflops"] = (
                2 * n**3 / (_median_ms(functools.partial(torch.matmul, a, b), flush) * 1e-3) / 1e12
            )
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed
    fp8 = _fp8_rate(flush)
    if fp8:
        rates["fp8_tflops"] = fp8
    return rates


def _fp8_rate(flush: torch.Tensor) -> float | None:
    """e4m3 x e4m3 -> bf16 through torch._scaled_mm (sm_89 and later); None where it is not supported."""
    n = 8192
    try:
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
        one = torch.ones((), device="cuda")
        call = functools.partial(torch._scaled_mm, a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        return 2 * n**3 / (_median_ms(call, flush) * 1e-3) / 1e12
    except (RuntimeError, AttributeError, TypeError):
        return None


def measure_peaks() -> dict[str, Any]:
    from harness.gpu import timing

    flush = timing.flush_buffer()
    return {
        **_bandwidths(flush),
        **_matmul_rates(flush),
        "measured": time.strftime("%Y-%m-%d %H:%M:%S"),
        "how": "1 GiB copy, 2-reads-1-write add and sum (float32; the fastest of torch and Triton kernels); "
        "8192³ bf16, fp16, TF32 (4096³ fp32) torch "
        "matmuls; fp8 e4m3 _scaled_mm where supported",
    }
