"""Reading what workers send: every value is checked before use (the candidate worker is untrusted).

Also the timing summary (median, percentiles) built from the raw samples.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import torch

from openkernel.evaluate.channel import Frame, decode_tensors
from openkernel.types import EvalStatus, TargetCompile, TimingStats, TrialCheck

__all__ = [
    "classify_error",
    "decode_outputs",
    "failed_check",
    "int_dict",
    "num",
    "opt_int",
    "opt_num",
    "probe_wait_ms",
    "side_work_median_ms",
    "side_work_ms",
    "target_compiles",
    "timing_samples",
    "timing_stats",
]


def decode_outputs(frame: Frame) -> tuple[str, list[torch.Tensor]]:
    structure = str(frame.header.get("structure", "other"))
    if not frame.header.get("sendable"):
        return structure, []
    return structure, decode_tensors(frame.header.get("tensors"), frame.payload)


def failed_check(index: int, reason: str) -> TrialCheck:
    return TrialCheck(index, False, reason, None, None, None)


def classify_error(header: dict[str, Any]) -> tuple[EvalStatus, str]:
    stage = str(header.get("stage", "?"))
    etype = str(header.get("error_type", "Error"))
    message = str(header.get("message", "")).strip().splitlines()
    first = message[0] if message else ""
    if etype == "NoModelNew":
        return EvalStatus.COMPILE_ERROR, first
    if etype in ("CompiledNotRun", "CompileCheckUnavailable"):
        return EvalStatus.COMPILED, first
    if etype == "CudaBuildError":
        return EvalStatus.COMPILE_ERROR, f"the CUDA extension failed to build: {first}"
    if stage == "import":
        if etype in ("SyntaxError", "IndentationError", "TabError"):
            return EvalStatus.COMPILE_ERROR, f"syntax error in the candidate: {first}"
        return EvalStatus.COMPILE_ERROR, f"importing the candidate failed: {etype}: {first}"
    if header.get("in_triton") and is_triton_compile_error(etype, first):
        return EvalStatus.COMPILE_ERROR, f"a Triton kernel failed to compile: {etype}: {first}"
    return EvalStatus.RUNTIME_ERROR, f"{etype} in {stage}: {first}"


_COMPILE_KINDS = (
    "NameError",
    "UnboundLocalError",
    "AttributeError",
    "CompilationError",
    "UnsupportedLanguageConstruct",
)


def is_triton_compile_error(etype: str, message: str) -> bool:
    """Errors a GPU build would raise at compile time (the interpreter wraps them in InterpreterError)."""
    if "CompilationError" in etype or etype in _COMPILE_KINDS:
        return True
    return etype == "InterpreterError" and message.startswith(_COMPILE_KINDS)


def num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else float("nan")


def target_compiles(value: Any) -> list[TargetCompile]:
    """Validate the worker's compile-check reports (they come from the untrusted process)."""
    out: list[TargetCompile] = []
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        out.append(
            TargetCompile(
                kernel=str(item.get("kernel_name", "?")),
                target=str(item.get("target", "?")),
                ok=item.get("ok") is True,
                error=str(item["error"]) if item.get("error") is not None else None,
                registers_per_thread=opt_int(item.get("registers_per_thread")),
                spill_store_bytes=opt_int(item.get("spill_store_bytes")),
                shared_bytes=opt_int(item.get("shared_bytes")),
            )
        )
    return out


def opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def opt_num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def int_dict(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int)}


def timing_samples(timing: dict[str, Any]) -> list[dict[str, float]]:
    event = timing.get("event_ms") or []
    synced = timing.get("synced_ms") or [float("nan")] * len(event)
    wall = timing.get("wall_ms") or [float("nan")] * len(event)
    late = timing.get("late") or [False] * len(event)
    return [
        {"event_ms": num(e), "synced_ms": num(s), "wall_ms": num(w), "late": 1.0 if x is True else 0.0}
        for e, s, w, x in zip(event, synced, wall, late, strict=False)
    ]


def _gaps(samples: list[dict[str, float]]) -> list[tuple[float, float]]:
    """Per GPU sample: (gap from the end event to the device-wide sync, less the output probe's own GPU
    time where there was one; that call's idle sync, NaN where there was none)."""
    return [
        (s["synced_ms"] - s["event_ms"] - _or_zero(s.get("probe_ms")), s.get("sync_ms", math.nan))
        for s in samples
        if not math.isnan(s["synced_ms"])
    ]


def _or_zero(value: float | None) -> float:
    return 0.0 if value is None or math.isnan(value) else value


def side_work_ms(samples: list[dict[str, float]]) -> float | None:
    """How long a device-wide sync still waited after the harness stream's end, beyond the host's own
    round trip: the smallest gap minus the smallest idle sync. None without GPU samples.

    Work left on another stream shows in every call's gap; a busy host's round trip shows in both
    terms, so it cancels instead of looking like side-stream work (on the H200, 8 evaluations at once
    gave an honest 5 us kernel a 0.07 ms gap in every call). Samples without an idle sync (older
    workers) count it as zero.
    """
    gaps = _gaps(samples)
    if not gaps:
        return None
    idle = [sync for _, sync in gaps if not math.isnan(sync)]
    return min(gap for gap, _ in gaps) - (min(idle) if idle else 0.0)


def side_work_median_ms(samples: list[dict[str, float]]) -> float | None:
    """The median over calls of each call's gap less that call's idle sync. None without GPU samples.

    A candidate that joins its side stream in a few timed calls sets the smallest gap with them and
    hides work in the rest; the median shows it.
    """
    per_call = [gap - _or_zero(sync) for gap, sync in _gaps(samples)]
    return statistics.median(per_call) if per_call else None


def probe_wait_ms(samples: list[dict[str, float]]) -> float | None:
    """How long the output probe waited after the call's end: the median over calls of its GPU time
    less the same reads' time with nothing pending. Only calls whose probe the host queued before the
    GPU reached the call's end count (else host time is inside); None when under half the calls did."""
    waits = [
        s["probe_ms"] - s["probe_idle_ms"]
        for s in samples
        if s.get("probe_queued") and not math.isnan(s.get("probe_ms", math.nan) + s.get("probe_idle_ms", math.nan))
    ]
    return statistics.median(waits) if waits and 2 * len(waits) >= len(samples) else None


def timing_stats(samples: list[dict[str, float]], method: str) -> TimingStats:
    values = sorted(s["event_ms"] for s in samples)
    synced = [s["synced_ms"] for s in samples if s["synced_ms"] == s["synced_ms"]]
    wall = [s["wall_ms"] for s in samples if s["wall_ms"] == s["wall_ms"]]
    n = len(values)

    def pct(p: float) -> float:
        return values[min(n - 1, max(0, round(p * (n - 1))))]

    return TimingStats(
        method=method,
        samples=n,
        median_ms=statistics.median(values),
        mean_ms=statistics.fmean(values),
        min_ms=values[0],
        max_ms=values[-1],
        p10_ms=pct(0.10),
        p90_ms=pct(0.90),
        stdev_ms=statistics.stdev(values) if n > 1 else 0.0,
        synced_median_ms=statistics.median(synced) if synced and method == "cuda_events" else None,
        wall_median_ms=statistics.median(wall) if wall else None,
        late_samples=sum(1 for s in samples if s.get("late")),
        side_work_ms=side_work_ms(samples) if method == "cuda_events" else None,
        side_median_ms=side_work_median_ms(samples) if method == "cuda_events" else None,
        probe_wait_ms=probe_wait_ms(samples) if method == "cuda_events" else None,
    )
