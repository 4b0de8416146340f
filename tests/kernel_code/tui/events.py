"""Hand-made event sequences for the TUI tests and the 10k benchmark: whole sessions, no engine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from openkernel.events import (
    Decision,
    DecisionKind,
    DiagnosisMade,
    EvaluationFinished,
    Event,
    GeneratorDelta,
    IterationStarted,
    KernelProposed,
    SessionConfig,
    SessionFinished,
    SessionStarted,
    UsageUpdate,
)

SID = "s-1"
H200 = "cuda:0 (NVIDIA H200)"
CPU = "cpu (Triton interpreter)"
FLOPS = 10_000_000  # the problem's FLOPs per forward
MIN_BYTES = 8_000_000  # its minimal bytes: intensity 1.25 FLOP/byte
REFERENCE_MS = 0.1
BANDWIDTH = 4.8e12
PEAK = 67e12


def started(device: str = H200, iterations: int | None = 10, at: float = 0.0) -> SessionStarted:
    config = SessionConfig("triton", "openai:gpt-4o", "full", iterations, None, None, None)
    return SessionStarted(SID, at, "softmax_fp32", "/p/softmax_fp32.py", "triton", "openai:gpt-4o", device,
                          "NVIDIA H200", config)  # fmt: skip


def profile_json(runtime_ms: float | None) -> dict[str, Any]:
    sol_ms = MIN_BYTES / BANDWIDTH * 1e3
    timed = runtime_ms is not None
    return {
        "flops": FLOPS,
        "min_bytes": MIN_BYTES,
        "arithmetic_intensity": FLOPS / MIN_BYTES,
        "sol_time_ms": sol_ms,
        "bottleneck": "memory_bound" if timed else None,
        "headroom": runtime_ms / sol_ms if runtime_ms else None,
        "dtype": "float32",
        "compute_ceiling": "fp32",
        "peak_flops_per_s": PEAK,
        "peak_flops_source": "datasheet",
        "bandwidth_bytes_per_s": BANDWIDTH,
        "bandwidth_source": "datasheet",
        "compute_time_ms": FLOPS / PEAK * 1e3,
        "memory_time_ms": sol_ms,
        "bound_by": "memory",
        "measured_time_ms": runtime_ms,
        "achieved_bytes_per_s": MIN_BYTES / (runtime_ms / 1e3) if runtime_ms else None,
        "achieved_flops_per_s": FLOPS / (runtime_ms / 1e3) if runtime_ms else None,
        "pct_of_peak": None,
        "evidence": [],
        "flops_by_rule": [{"op": "aten._softmax", "flops": FLOPS, "dtype": "float32"}],
    }


def result_json(status: str, speedup: float | None, gpu: bool = True) -> dict[str, Any]:
    runtime = REFERENCE_MS / speedup if speedup else None
    return {
        "status": status,
        "reasons": ["all checks passed"] if status == "correct" else [f"{status}: output differs at 3 elements"],
        "speedup": speedup,
        "runtime_ms": runtime,
        "reference_runtime_ms": REFERENCE_MS,
        "timing_valid": gpu,
        "timing_note": None if gpu else "wall clock on the CPU under the Triton interpreter",
        "profile": profile_json(runtime if gpu else None),
    }


def diagnosis_json(lead: str = "The kernel reads its input twice") -> dict[str, Any]:
    step = {"title": "Fuse the two passes", "why": "two reads", "skill_ids": ["online-softmax"],
            "expected_effect": "1.5x", "rank": 1, "profile_driven": True}  # fmt: skip
    return {"bottleneck": "memory_bound", "headline": "Bottleneck: memory_bound", "evidence": ["72%"],
            "signals": ["low_dram_throughput"], "changes": [], "next_steps": [step], "lead": lead}  # fmt: skip


def iteration(
    n: int, decision: DecisionKind, speedup: float | None, best: int | None, gpu: bool = True, at: float = 0.0,
    intent: str | None = None, text: str = "I will fuse the passes.\n```python\ncode\n```\n",
) -> list[Event]:  # fmt: skip
    """One whole iteration; an error without a kernel when ``decision`` is "error" and ``speedup`` None."""
    intent = intent or f"idea {n}"
    events: list[Event] = [IterationStarted(SID, at, n, None), GeneratorDelta(SID, at, n, text)]
    events.append(UsageUpdate(SID, at, n, 100, 50, 0.01, 150 * (n + 1), 0.01 * (n + 1)))
    if decision != "error" or speedup is not None:
        status = "correct" if decision != "error" else "incorrect"
        events += [
            KernelProposed(SID, at, n, f"kernels/iter_{n:04d}.py", intent, "0" * 64),
            EvaluationFinished(SID, at, n, result_json(status, speedup if status == "correct" else None, gpu)),
            DiagnosisMade(SID, at, n, diagnosis_json()),
        ]
    reason = {"keep": "faster", "discard": "not faster than the best", "error": "incorrect"}[decision]
    events.append(Decision(SID, at, n, decision, reason, speedup if decision != "error" else None, best))
    return events


def mid_run(gpu: bool = True) -> list[Event]:
    """Started, then: keep 1.0x, discard 0.7x, keep 1.3x, error, keep 1.8x; iteration 5 running."""
    return [
        started(H200 if gpu else CPU),
        *iteration(0, "keep", 1.0, 0, gpu, intent="baseline"),
        *iteration(1, "discard", 0.7, 0, gpu, intent="bad tiling"),
        *iteration(2, "keep", 1.3, 2, gpu, intent="shared mem"),
        *iteration(3, "error", None, 2, gpu, intent="no gain"),
        *iteration(4, "keep", 1.8, 4, gpu, intent="vectorized"),
        IterationStarted(SID, 0.0, 5, None),
        GeneratorDelta(SID, 0.0, 5, "Trying register blocking next"),
    ]


def finished(iterations: int = 5) -> SessionFinished:
    return SessionFinished(SID, 0.0, "iteration budget spent (5 of 5)", 4, 1.8, iterations)


def synthetic(iterations: int) -> Iterator[Event]:
    """A long session for the benchmark: a keep every seventh iteration, an error every eleventh."""
    yield started(iterations=iterations)
    best, best_speedup = None, 0.0
    for n in range(iterations):
        speedup = 1.0 + (n % 97) / 50
        if n % 11 == 5:
            yield from iteration(n, "error", None, best)
        elif n % 7 == 0 or speedup > best_speedup:
            best, best_speedup = n, max(best_speedup, speedup)
            yield from iteration(n, "keep", speedup, best)
        else:
            yield from iteration(n, "discard", speedup, best)
    yield SessionFinished(SID, 0.0, "iteration budget spent", best, best_speedup, iterations)
