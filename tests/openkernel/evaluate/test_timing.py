"""Timed calls: the late-call flag (the GPU reached a call before the host had queued it) and its count,
the side-stream figures, and the output probe read right after each call's end event."""

import dataclasses
import time
from types import SimpleNamespace

import torch

from openkernel import TimingStats
from openkernel.evaluate import harness as h
from openkernel.evaluate.candidate_run import CandidateRun
from openkernel.evaluate.reading import (
    probe_wait_ms,
    side_work_median_ms,
    side_work_ms,
    timing_samples,
    timing_stats,
)
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
    """side_stream_sometimes.py's pattern: one call joins its side stream, the others leave 0.04 ms."""
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


def test_the_probes_own_time_is_not_side_stream_work() -> None:
    """The device-wide sync waits for the output probe too: its GPU time comes off each call's gap."""
    samples = _samples([0.1] * 3, [0.140, 0.150, 0.145], [0.02] * 3)
    for row, probe in zip(samples, [0.010, 0.020, 0.015], strict=True):
        row["probe_ms"] = probe
    assert [round(v or 0.0, 9) for v in (side_work_ms(samples), side_work_median_ms(samples))] == [0.01, 0.01]


def test_the_probe_wait_counts_only_probes_queued_in_time_and_needs_half_the_calls() -> None:
    timings = [(0.014, 0.010, 1.0), (0.016, 0.010, 1.0), (0.9, 0.010, 0.0), (0.015, 0.011, 1.0)]
    rows = [{"probe_ms": p, "probe_idle_ms": i, "probe_queued": q} for p, i, q in timings]
    assert round(probe_wait_ms(rows) or 0.0, 9) == 0.004  # the late one (host time inside) is left out
    assert probe_wait_ms([{**r, "probe_queued": 0.0} for r in rows[:3]] + rows[3:]) is None
    assert timing_stats(_samples([0.1] * 4, [0.2] * 4, None), "cuda_events").probe_wait_ms is None  # older workers


def test_the_output_probe_sees_elements_written_after_it_read_them() -> None:
    """On CPU tensors (the logic is the same on a GPU): random positions of a large tensor, all of a small one."""
    cpu = torch.device("cpu")
    big = torch.zeros(1 << 20)
    probe = h.OutputProbe([big], cpu)
    assert not probe.changed()
    big[: 1 << 19] = 1.0  # half the elements written "late": some of the 8192 probed ones are among them
    assert probe.changed()
    wide = torch.zeros(512, 1024).t()  # not contiguous: probed through per-dimension indices
    probe = h.OutputProbe([wide], cpu)
    wide[:, :256] = float("nan")
    assert probe.changed()
    small = torch.zeros(100)
    probe = h.OutputProbe([small, torch.empty(0)], cpu)
    small[99] = -0.0  # one element, and only its sign bit: the comparison is bitwise
    assert probe.changed()


@needs_gpu
def test_the_output_probe_passes_an_honest_call_and_catches_rows_written_on_a_side_stream() -> None:
    device = torch.device("cuda")
    x = torch.randn(4096, 4096, device=device)
    side = torch.cuda.Stream()

    def honest() -> torch.Tensor:
        return torch.softmax(x, dim=1)

    def rows_left_on_a_side_stream() -> torch.Tensor:
        out = torch.empty_like(x)
        out[:2048] = torch.softmax(x[:2048], dim=1)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(200_000)  # ~0.1 ms: the rows land after the probe has read them
            out[2048:] = torch.softmax(x[2048:], dim=1)
        return out

    def outputs(value: torch.Tensor) -> list[torch.Tensor]:
        return [value]

    for call in (honest, rows_left_on_a_side_stream):
        h.time_call(call, device, probe_outputs=outputs)  # warm-up: kernel modules load
    _, fair = h.time_call(honest, device, probe_outputs=outputs)
    assert (fair.written_late, fair.probe_queued) == (False, True)
    assert fair.probe_ms is not None and fair.probe_idle_ms is not None
    assert fair.probe_ms - fair.probe_idle_ms < 0.02
    _, hidden = h.time_call(rows_left_on_a_side_stream, device, probe_outputs=outputs)
    assert hidden.written_late is True


@needs_gpu
def test_work_that_fills_the_gpu_after_the_end_makes_the_probe_wait() -> None:
    """Side-stream work that writes nothing of the output but holds every SM: the probe's reads queue behind it."""
    device = torch.device("cuda")
    x = torch.randn(1 << 20, device=device)
    big = torch.randn(1 << 28, device=device)  # 1 GiB: ~0.5 ms to read and write at the H200's bandwidth
    side = torch.cuda.Stream()

    def call() -> torch.Tensor:
        out = x * 2
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            big.mul_(1.0)  # after the harness stream's work, in blocks that fill the GPU
        return out

    h.time_call(call, device, probe_outputs=lambda value: [value])
    _, t = h.time_call(call, device, probe_outputs=lambda value: [value])
    assert t.written_late is False and t.probe_queued is True
    assert t.probe_ms is not None and t.probe_idle_ms is not None
    assert t.probe_ms - t.probe_idle_ms > 0.2


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


def _verdict_on(med: float, work: float, per_call: float, probe: float | None) -> str | None:
    stats = TimingStats("cuda_events", 50, med, med, med, med, med, med, 0.0, med + per_call + 0.02, None)
    stats = dataclasses.replace(stats, side_work_ms=work, side_median_ms=per_call, probe_wait_ms=probe)
    return CandidateRun._outside_work(SimpleNamespace(timing=stats), med)  # type: ignore[arg-type]


def test_the_side_stream_gate_passes_honest_figures_and_names_each_kind_of_outside_work() -> None:
    # Honest figures measured on the H200 (BENCHMARKS.md): a 5 us kernel beside others, a 1.4 ms matmul.
    assert _verdict_on(0.005, 0.048, 0.066, 0.004) is None
    assert _verdict_on(1.43, 0.011, 0.060, 0.004) is None
    assert _verdict_on(1.43, 0.011, 0.12, None) is None  # within 10% of a long kernel's time
    always = _verdict_on(0.08, 0.07, 0.07, 0.004)
    assert always is not None and always.startswith("work finished outside the timed stream: 0.0800 ms")
    most = _verdict_on(0.08, 0.0, 0.15, 0.004)
    assert most is not None and "in most timed calls: the median call waited 0.1500 ms" in most
    held = _verdict_on(0.08, 0.0, 0.02, 0.03)
    assert held is not None and held.startswith("work held the GPU after the timed stream's end")
