"""What the GPU was doing while timed: NVML samples summarised, and a clear note where NVML is missing."""

from __future__ import annotations

import pytest
import torch

from harness.contract.report import _clocks_detail
from harness.judge.clocks import ClockSampler, Sample, summarize


def test_slowed_samples_are_counted_with_their_reasons() -> None:
    samples = [
        Sample(0.00, 1980, 500.0, 60, 0x0),
        Sample(0.02, 1980, 650.0, 62, 0x1),  # idle: not a slowdown
        Sample(0.04, 1755, 700.0, 66, 0x4),  # power cap
        Sample(0.06, 1700, 700.0, 71, 0x4 | 0x20),  # power cap and software thermal
    ]
    summary = summarize(samples)
    assert summary["sm_mhz"] == [1700, 1867.5, 1980] and summary["temp_c"] == 71
    assert summary["slowed_pct"] == 50.0 and summary["reasons"] == ["power cap", "thermal (software)"]
    assert _clocks_detail(summary) == "  SM 1700-1980 MHz, slowed 50% of the time (power cap, thermal (software))"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU (tests/test_gpu.py samples it)")
def test_no_gpu_gives_a_note_and_no_samples() -> None:
    sampler = ClockSampler.for_current_device()  # no NVML driver on a machine with no GPU
    sampler.start()
    summary = sampler.stop()
    assert "sm_mhz" not in summary and summary["note"]
    assert _clocks_detail(summary) == ""


def test_stopping_does_not_wait_for_a_slow_nvml_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """An NVML read can take most of a second on an H200: the verdict must not wait for it, and what the read
    returns late must not land among the next run's samples."""
    import threading
    import time

    from harness.judge import clocks

    inside, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def slow_sample(nvml: object, handle: object, seconds: float) -> Sample:
        calls.append(1)
        if len(calls) == 1:  # the first read hangs until released; later ones answer at once
            inside.set()
            release.wait(10)
            return Sample(seconds, 1, 1.0, 1, 0)  # the late sample: 1 MHz
        return Sample(seconds, 1980, 500.0, 60, 0)

    monkeypatch.setattr(clocks, "_sample", slow_sample)
    sampler = ClockSampler(handle=object())
    sampler.start()
    assert inside.wait(10)
    began = time.perf_counter()
    assert "sm_mhz" not in sampler.stop()  # nothing sampled yet, said at once
    assert time.perf_counter() - began < 1.0
    late = sampler._thread
    sampler.start()
    release.set()
    assert late is not None
    late.join(10)  # the late read has returned, and its thread ended
    while len(sampler.samples) < 2:  # the new run's own samples
        time.sleep(0.01)
    summary = sampler.stop()
    assert summary["sm_mhz"][0] == 1980, summary
