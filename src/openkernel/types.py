"""Domain data: frozen dataclasses, units in the names, ``None`` where a value was not measured.

Everything the engine reports about a kernel lives here, so that the CLI, the TUI, the dashboard
and the trace writer all read the same shapes. Validation happens at the edges (worker messages,
config), not in these classes.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openkernel.profile.roofline import Roofline

__all__ = [
    "EvalResult",
    "EvalStatus",
    "KernelLaunchCount",
    "Problem",
    "TargetCompile",
    "TimingStats",
    "TrialCheck",
]


class EvalStatus(enum.StrEnum):
    """The verdict on one candidate. Exactly one per evaluation."""

    CORRECT = "correct"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    REJECTED = "rejected"  # an integrity violation: the candidate tried to fake a result
    COMPILED = "compiled"  # CUDA source compiled with nvcc, but not run: this machine has no GPU


@dataclass(frozen=True)
class Problem:
    """A reference problem: a KernelBench-style file (``Model``, ``get_inputs``, ``get_init_inputs``)."""

    name: str  # "softmax_fp32", "L1#23", or the file's stem
    path: Path
    small_sizes: tuple[tuple[str, int | float], ...]  # the file's SMALL_SIZES, empty when absent
    source: str  # "bundled", "kernelbench" or "file"

    @property
    def has_small_size(self) -> bool:
        return bool(self.small_sizes)


@dataclass(frozen=True)
class TimingStats:
    """Summary of many timed calls of one kernel (or of the baseline)."""

    method: str  # "cuda_events" (with L2 flush and a device-wide sync) or "wall_clock"
    samples: int  # timed calls after warm-up
    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    p10_ms: float
    p90_ms: float
    stdev_ms: float
    synced_median_ms: float | None  # start to after a device-wide sync: catches side-stream work
    wall_median_ms: float | None  # the host's wall clock around the same calls
    # Timed calls the GPU reached before the host had queued them: their times include host time.
    late_samples: int = 0
    # How long a device-wide sync still waited after the harness stream's end, beyond the host's own
    # round trip (GPU only): the side-stream gate's figure (smallest gap less smallest idle sync), and
    # the median call's (its gap less its own idle sync), which hiding in only some calls cannot lower.
    side_work_ms: float | None = None
    side_median_ms: float | None = None
    # How long the output probe (output elements read right after the end event) waited for the GPU,
    # median call: work hidden on another stream that holds the GPU delays it.
    probe_wait_ms: float | None = None

    @property
    def spread_pct(self) -> float:
        """(p90 - p10) / median, in percent: the noise band of this measurement."""
        return 100.0 * (self.p90_ms - self.p10_ms) / self.median_ms if self.median_ms > 0 else 0.0


@dataclass(frozen=True)
class TrialCheck:
    """The parent's comparison of one candidate output with the reference's."""

    trial: int  # correctness trial index, or -1 - k for the k-th checked timed call
    passed: bool
    reason: str | None  # why it failed, in words; None when passed
    max_abs_error: float | None
    max_rel_error: float | None
    mismatched_elements: int | None


@dataclass(frozen=True)
class KernelLaunchCount:
    name: str
    launches: int


@dataclass(frozen=True)
class TargetCompile:
    """A Triton kernel compiled for a real GPU target on a machine without one (a compile check)."""

    kernel: str
    target: str  # "cuda:90"
    ok: bool
    error: str | None
    registers_per_thread: int | None
    spill_store_bytes: int | None
    shared_bytes: int | None


@dataclass(frozen=True)
class EvalResult:
    """Everything one evaluation found. ``to_json()`` is the ``kernel-code eval --json`` contract."""

    status: EvalStatus
    reasons: tuple[str, ...]  # human-readable, most important first
    problem: str
    candidate: str
    backend: str  # "triton" or "cuda"
    device: str  # "cuda:0 (NVIDIA H200)" or "cpu (Triton interpreter)"
    size: str  # "full" or "small"
    timing_valid: bool
    timing_note: str | None  # why timings are not valid, or what was special about them
    runtime_ms: float | None
    reference_runtime_ms: float | None
    speedup: float | None  # reference / candidate, only when both ran
    compile_baseline_runtime_ms: float | None  # torch.compile of the reference, when asked for
    candidate_timing: TimingStats | None
    reference_timing: TimingStats | None
    trials: tuple[TrialCheck, ...]
    kernels_launched: tuple[KernelLaunchCount, ...]
    candidate_aten_ops: tuple[str, ...]
    target_compiles: tuple[TargetCompile, ...]  # only without a GPU: the sm_90 compile check
    profile: Roofline | None  # the roofline of this problem on this GPU (or the target), with this time
    warnings: tuple[str, ...]
    wall_seconds: float
    log_tail: str  # the candidate worker's captured stdout/stderr, bounded
    # Where the wall time went: "reference", "waiting for the GPU", "candidate import", "correctness
    # trials", "timed calls", ... in seconds, in the order they happened.
    phase_seconds: dict[str, float] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = _jsonable(dataclasses.asdict(dataclasses.replace(self, profile=None)))
        assert isinstance(out, dict)
        out["status"] = self.status.value
        out["profile"] = _jsonable(self.profile.to_json()) if self.profile is not None else None
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and math.isnan(value):  # NaN is not JSON
        return None
    return value
