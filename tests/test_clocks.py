"""What the GPU was doing while timed: NVML samples summarised, and a clear note where NVML is missing."""

from __future__ import annotations

import pytest
import torch

from harness.clocks import ClockSampler, Sample, summarize
from harness.report import _clocks_detail


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
