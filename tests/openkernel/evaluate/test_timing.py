"""Timed calls: the late-call flag (the GPU reached a call before the host had queued it) and its count."""

import time

import torch

from openkernel.evaluate import harness as h
from openkernel.evaluate.reading import side_work_median_ms, side_work_ms, timing_samples, timing_stats
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


def _samples(event: list[float], synced: list[float], idle: list[float] | None) -> list[dict[str, float]]:
    nan = float("nan")
    rows = [{"event_ms": e, "synced_ms": s, "wall_ms": nan} for e, s in zip(event, synced, strict=True)]
    for row, i in zip(rows, idle or [], strict=False):
        row["sync_ms"] = i
    return rows


def test_a_busy_hosts_round_trip_is_not_side_stream_work() -> None:
    """Seen on the H200 with 8 evaluations at once: an honest 5 us kernel, 0.07 ms gap in every call."""
    samples = _samples([0.005] * 3, [0.075, 0.080, 0.090], [0.070, 0.250, 0.072])
    assert side_work_ms(samples) == 0.075 - 0.005 - 0.070


def test_work_left_on_a_side_stream_shows_beyond_the_round_trip() -> None:
    samples = _samples([0.0013] * 3, [0.160, 0.155, 0.170], [0.010, 0.012, 0.011])
    assert side_work_ms(samples) == 0.155 - 0.0013 - 0.010


def test_hiding_work_in_most_calls_passes_the_smallest_gap_but_not_the_median_call() -> None:
    """The open hole side_stream_sometimes.py: one call joins its side stream, the others leave 0.04 ms."""
    samples = _samples([0.09] * 5, [0.12, 0.16, 0.16, 0.16, 0.16], [0.03] * 5)
    assert round(side_work_ms(samples) or 0.0, 9) == 0.0
    assert round(side_work_median_ms(samples) or 0.0, 9) == 0.04
    stats = timing_stats(samples, "cuda_events")
    assert (round(stats.side_work_ms or 0.0, 9), round(stats.side_median_ms or 0.0, 9)) == (0.0, 0.04)
    # The busy host of the H200: an idle sync that is slow once does not turn into side-stream work.
    busy = _samples([0.005] * 3, [0.075, 0.080, 0.090], [0.070, 0.250, 0.072])
    assert round(side_work_median_ms(busy) or 0.0, 9) == 0.0
    assert timing_stats(busy, "wall_clock").side_median_ms is None


def test_without_idle_syncs_the_whole_gap_counts_and_without_a_gpu_there_is_none() -> None:
    assert side_work_ms(_samples([0.1, 0.1], [0.2, 0.3], None)) == 0.2 - 0.1
    nan = float("nan")
    assert side_work_ms(_samples([1.0, 2.0], [nan, nan], None)) is None


@needs_gpu
def test_work_on_a_side_stream_widens_the_gap_but_not_the_idle_sync() -> None:
    device = torch.device("cuda")
    side = torch.cuda.Stream()

    def with_side_work() -> None:
        with torch.cuda.stream(side):
            # ~5 ms of device time the harness stream does not wait for; it starts at once, during the
            # harness stream's ~1 ms lead, so about 4 ms of it is left when the timed call ends.
            torch.cuda._sleep(10_000_000)

    h.time_call(with_side_work, device)
    _, t = h.time_call(with_side_work, device)
    assert t.synced_ms is not None and t.sync_ms is not None
    assert t.synced_ms - t.event_ms > 1.0
    assert t.sync_ms < 0.5


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
