"""Timed calls: the late-call flag (the GPU reached a call before the host had queued it) and its count."""

import time

import torch

from openkernel.evaluate import harness as h
from openkernel.evaluate.reading import timing_samples, timing_stats
from tests.conftest import needs_gpu


def test_late_calls_are_counted_from_a_worker_payload() -> None:
    payload = {
        "method": "cuda_events",
        "event_ms": [0.125, 0.25, 0.5, 0.375],
        "synced_ms": [0.10, 0.11, 0.30, 0.12],
        "wall_ms": [1.1, 1.1, 1.4, 1.1],
        "late": [False, False, True, False],
    }
    stats = timing_stats(timing_samples(payload), "cuda_events")
    assert stats.samples == 4
    assert stats.late_samples == 1
    assert stats.median_ms == 0.3125


def test_a_payload_without_late_flags_has_none() -> None:
    """Records written before the flag existed read as 'no late calls', not as an error."""
    payload = {"method": "wall_clock", "event_ms": [2.0, 3.0], "synced_ms": None, "wall_ms": [2.0, 3.0]}
    stats = timing_stats(timing_samples(payload), "wall_clock")
    assert (stats.samples, stats.late_samples, stats.median_ms) == (2, 0, 2.5)


@needs_gpu
def test_a_call_queued_within_the_lead_is_not_late_and_a_slow_host_is() -> None:
    device = torch.device("cuda")
    x = torch.randn(1 << 20, device=device)
    h.time_call(lambda: x * 2, device)  # the first launch loads the kernel's module: host work, not timed here
    _, quick = h.time_call(lambda: x * 2, device)
    assert not quick.late

    def slow_host() -> torch.Tensor:
        time.sleep(0.02)  # 20 ms of "Python" before the launch: far past the ~1 ms lead
        return x * 2

    _, slow = h.time_call(slow_host, device)
    assert slow.late
    assert slow.event_ms > 15.0  # the host's time is inside this sample, which is why it is flagged
