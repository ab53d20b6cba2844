"""What the GPU was doing while a version was timed: SM clock, power, temperature and why clocks were held
down, sampled through NVML (nvidia-ml-py) by the judge, never the version's process.

A kernel timed while the clocks dropped (a power cap under sustained load, heat) reads slower than the
same kernel in a short burst, as Nsight Compute times it: the figures say so rather than leave it a mystery.
Where NVML or its Python binding is missing, the sampler says why and samples nothing.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

PERIOD_S = 0.02
GRACE_US = 250_000  # NVML's process samples span up to about a sixth of a second each
# NVML's clocks event (throttle) reasons, by bit; idle and the applications-clock setting say nothing of a
# slowdown under load, and are left out.
SLOWDOWNS = {
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x20: "thermal (software)",
    0x40: "thermal (hardware)",
    0x80: "power brake",
    0x10: "sync boost",
}


@dataclass
class Sample:
    seconds: float
    sm_mhz: int
    power_w: float
    temp_c: int
    reasons: int


@dataclass
class ClockSampler:
    """Samples one GPU every PERIOD_S in a thread of its own between start() and stop()."""

    handle: Any = None
    note: str | None = None
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @classmethod
    def for_current_device(cls) -> ClockSampler:
        try:
            handle = _nvml_handle()
        except Exception as exc:  # no binding, no driver, no permission: said, never fatal
            return cls(note=f"no NVML ({type(exc).__name__}: {str(exc)[:160]}); pip install nvidia-ml-py")
        return cls(handle=handle)

    def start(self) -> None:
        # Each run its own list and stop event: a thread still inside a slow NVML call when stop() returns
        # (one read can take a good part of a second on an H200) finishes into a list nobody reads any more.
        self.samples, self._stop = [], threading.Event()
        if self.handle is None:
            return
        self._thread = threading.Thread(
            target=self._run, args=(self.samples, self._stop), name="kerneltui-clocks", daemon=True
        )
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        """The samples so far, summarized; does not wait for a sample in progress (it would delay the verdict)."""
        self._stop.set()
        taken = list(self.samples)
        return summarize(taken) if taken else {"note": self.note or "no samples"}

    def _run(self, samples: list[Sample], stop: threading.Event) -> None:
        import pynvml

        start = time.perf_counter()
        while not stop.is_set():
            try:
                samples.append(_sample(pynvml, self.handle, time.perf_counter() - start))
            except Exception as exc:
                self.note = f"NVML stopped answering: {type(exc).__name__}: {str(exc)[:160]}"
                return
            stop.wait(PERIOD_S)


def summarize(samples: list[Sample]) -> dict[str, Any]:
    """SM clock (min, median, max), power, the hottest reading, and the share of samples slowed, with why."""
    clocks = [s.sm_mhz for s in samples]
    slowed = [s for s in samples if s.reasons & sum(SLOWDOWNS)]
    reasons = sorted({name for s in slowed for bit, name in SLOWDOWNS.items() if s.reasons & bit})
    return {
        "sm_mhz": [min(clocks), statistics.median(clocks), max(clocks)],
        "power_w": [statistics.median(s.power_w for s in samples), max(s.power_w for s in samples)],
        "temp_c": max(s.temp_c for s in samples),
        "slowed_pct": 100.0 * len(slowed) / len(samples),
        "reasons": reasons,
        "n": len(samples),
    }


def _sample(nvml: Any, handle: Any, seconds: float) -> Sample:
    reasons_of = (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    return Sample(
        seconds=seconds,
        sm_mhz=int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        power_w=nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        temp_c=int(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
        reasons=int(reasons_of(handle)),
    )


def _nvml_handle() -> Any:
    """The NVML handle of the GPU torch calls cuda:0 (NVML numbers every GPU, ignoring CUDA_VISIBLE_DEVICES)."""
    import pynvml
    import torch

    pynvml.nvmlInit()
    props: Any = torch.cuda.get_device_properties(0)
    if hasattr(props, "pci_bus_id"):
        bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        return pynvml.nvmlDeviceGetHandleByPciBusId(bus)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
    if not visible.isdigit():
        return pynvml.nvmlDeviceGetHandleByUUID(visible)
    return pynvml.nvmlDeviceGetHandleByIndex(int(visible))


def now_us() -> int:
    """NVML's clock for process samples: µs since the epoch."""
    return int(time.time() * 1e6)


def busy_processes(handle: Any, since_us: int, until_us: int) -> set[int]:
    """The processes NVML saw computing on the GPU between `since_us` and `until_us` (its per-process samples,
    SM use above 0), leaving out the first GRACE_US: a sample taken then may still cover work from before.
    Empty where NVML keeps no such samples or is missing: evidence where there is some, never a verdict."""
    if handle is None or until_us - since_us <= GRACE_US:
        return set()
    try:
        import pynvml

        samples = pynvml.nvmlDeviceGetProcessUtilization(handle, since_us)
    except Exception:  # no sample in the window (NVML_ERROR_NOT_FOUND), or no support on this GPU or driver
        return set()
    return {
        int(s.pid)
        for s in samples
        if int(getattr(s, "smUtil", 0)) > 0 and since_us + GRACE_US <= int(s.timeStamp) <= until_us
    }
