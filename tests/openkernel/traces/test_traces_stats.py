"""Trace statistics on recorded sessions: every number worked out by hand."""

from __future__ import annotations

from pathlib import Path

from openkernel.traces.build import build_trace
from openkernel.traces.stats import Distribution, GroupStats, TraceStats, distribution, trace_stats
from openkernel.traces.write import to_table
from tests.trace_sessions import KERNEL_A, KERNEL_B, STEPS, Step, record


def test_stats_by_hardware_backend_and_model(tmp_path: Path) -> None:
    # s1: H200, 4 iterations: kept 2x, kept 4x, wrong, no code (final 4x)
    record(tmp_path / "s1", STEPS)
    # s2: A100, another model: kept 4x, wrong (final 4x)
    record(tmp_path / "s2", STEPS[1:3], model="anthropic:claude-test", hardware="NVIDIA A100")
    # s3: H200 like s1: kept 2.5x, then 5x written for CUDA (a backend switch), so a group of its own
    record(tmp_path / "s3", [Step(KERNEL_A, "a", 0.8), Step(KERNEL_B, "b", 0.4)])
    rows = [build_trace(tmp_path / name) for name in ("s1", "s2", "s3")]
    rows[2]["iterations"][1]["backend"] = "cuda"
    stats = trace_stats(to_table(rows))
    assert stats == TraceStats(
        sessions=3,
        iterations=8,
        kept=5,
        keep_rate=5 / 8,
        groups=(
            GroupStats(
                "NVIDIA A100", "triton", "anthropic:claude-test", sessions=1, iterations=2, kept=1, keep_rate=0.5,
                correct=1, speedup=Distribution(1, 4.0, 4.0, 4.0, 4.0, 4.0),
                best_speedup=Distribution(1, 4.0, 4.0, 4.0, 4.0, 4.0),
            ),
            GroupStats(
                "NVIDIA H200", "cuda", "openai:gpt-test", sessions=1, iterations=1, kept=1, keep_rate=1.0,
                correct=1, speedup=Distribution(1, 5.0, 5.0, 5.0, 5.0, 5.0),
                best_speedup=Distribution(1, 5.0, 5.0, 5.0, 5.0, 5.0),
            ),
            GroupStats(
                # speedups 2, 4 (s1) and 2.5 (s3); finals 4 (s1) and 5 (s3)
                "NVIDIA H200", "triton", "openai:gpt-test", sessions=2, iterations=5, kept=3, keep_rate=0.6,
                correct=3, speedup=Distribution(3, 2.0, 2.25, 2.5, 3.25, 4.0),
                best_speedup=Distribution(2, 4.0, 4.25, 4.5, 4.75, 5.0),
            ),
        ),
    )  # fmt: skip


def test_a_session_without_iterations_counts_in_its_own_group(tmp_path: Path) -> None:
    record(tmp_path / "s1", [])
    stats = trace_stats(to_table([build_trace(tmp_path / "s1")]))
    assert stats == TraceStats(
        sessions=1, iterations=0, kept=0, keep_rate=None,
        groups=(GroupStats("NVIDIA H200", "triton", "openai:gpt-test", 1, 0, 0, None, 0, None, None),),
    )  # fmt: skip


def test_quartiles_lie_within_the_data() -> None:
    assert distribution([]) is None
    assert distribution([3.0]) == Distribution(1, 3.0, 3.0, 3.0, 3.0, 3.0)
    assert distribution([5.0, 2.0, 4.0, 2.5]) == Distribution(4, 2.0, 2.375, 3.25, 4.25, 5.0)
