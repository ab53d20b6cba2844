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

# Dense rates from vendors' datasheets (SXM parts): GB/s, TFLOP/s.
DATASHEETS: dict[str, dict[str, float]] = {
    "H200": {"bandwidth_gbps": 4800, "bf16_tflops": 989, "fp32_tflops": 67},
    "H100 80GB HBM3": {"bandwidth_gbps": 3350, "bf16_tflops": 989, "fp32_tflops": 67},
    "H100 PCIe": {"bandwidth_gbps": 2000, "bf16_tflops": 756, "fp32_tflops": 51},
    "H100": {"bandwidth_gbps": 3350, "bf16_tflops": 989, "fp32_tflops": 67},
    "A100-SXM4-80GB": {"bandwidth_gbps": 2039, "bf16_tflops": 312, "fp32_tflops": 19.5},
    "A100": {"bandwidth_gbps": 1555, "bf16_tflops": 312, "fp32_tflops": 19.5},
    "L40S": {"bandwidth_gbps": 864, "bf16_tflops": 362, "fp32_tflops": 91.6},
    "RTX 4090": {"bandwidth_gbps": 1008, "bf16_tflops": 165, "fp32_tflops": 82.6},
    "B200": {"bandwidth_gbps": 8000, "bf16_tflops": 2250, "fp32_tflops": 80},
}


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


def peaks(device: dict[str, Any], cache_dir: Path | None) -> dict[str, Any]:
    """Measured ceilings for this device, from the cache when it has them."""
    key = f"{device.get('name')}|{device.get('driver')}|{device.get('torch')}"
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


def _copy_ms(flush: torch.Tensor) -> float:
    from harness import timing

    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    return timing.summarize(timing.time_calls(lambda: dst.copy_(src), flush, budget_s=0.5)).median_us / 1e3


def measure_peaks() -> dict[str, Any]:
    from harness import timing

    flush = timing.flush_buffer()
    copy_ms = _copy_ms(flush)
    rates = {}
    for label, dtype, n in (("bf16_tflops", torch.bfloat16, 8192), ("fp32_tflops", torch.float32, 4096)):
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        ms = (
            timing.summarize(timing.time_calls(functools.partial(torch.matmul, a, b), flush, budget_s=0.5)).median_us
            / 1e3
        )
        rates[label] = 2 * n**3 / (ms * 1e-3) / 1e12
    return {
        "copy_gbps": 2 * (1 << 30) / (copy_ms * 1e-3) / 1e9,
        **rates,
        "measured": time.strftime("%Y-%m-%d %H:%M:%S"),
        "how": "1 GiB device-to-device copy (read + write); 8192³ bf16 and 4096³ fp32 torch matmuls",
    }
