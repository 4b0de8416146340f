"""Roofline: the fastest time a problem's work allows on a GPU, and what bounds a kernel against it.

The work is counted once where the reference runs (``count_work``: FLOPs by ``openkernel.profile.flops``,
minimal bytes here); ``analyse`` is pure arithmetic on those counts, the ceilings that
``openkernel.hardware.ceilings`` picked (measured where calibrated), and a measured time when there is
one, so the analytic half works without a GPU. Speed of light = max(FLOPs / peak, bytes / bandwidth).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from openkernel.hardware import Ceilings
from openkernel.profile.flops import FlopCount, count_flops_and_output, tensors_in

__all__ = [
    "ACHIEVED_FRACTION_BOUND",
    "LATENCY_BOUND_MS",
    "Roofline",
    "WorkCount",
    "analyse",
    "count_work",
    "min_bytes",
]

# A kernel that reaches this fraction of a ceiling is bound by it (well-tuned kernels reach 80-95%).
ACHIEVED_FRACTION_BOUND = 0.60
# Below this measured time (20 us) launch, sync and tail latency are a large share of one call.
LATENCY_BOUND_MS = 0.020


def min_bytes(inputs: Sequence[object], outputs: object, parameters: Iterable[torch.Tensor]) -> int:
    """Bytes that must cross DRAM at least once: every input, parameter and output, once each.

    Tensors are grouped by storage, and each storage counts the union of the byte ranges its tensors
    span: a tensor shared by two arguments counts once, an expanded (stride-0) input counts its real
    bytes, and q/k/v views into one packed tensor count their own regions.
    """
    spans: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for tensor in (*tensors_in(list(inputs)), *tensors_in(outputs), *parameters):
        if tensor.numel() == 0:
            continue
        size = tensor.element_size()
        extent = 1 + sum((int(n) - 1) * abs(int(s)) for n, s in zip(tensor.shape, tensor.stride(), strict=True))
        start = int(tensor.storage_offset()) * size
        key = (str(tensor.device), tensor.untyped_storage().data_ptr())
        spans.setdefault(key, []).append((start, start + extent * size))
    total = 0
    for ranges in spans.values():
        end = -1
        for lo, hi in sorted(ranges):
            total += max(0, hi - max(lo, end))
            end = max(end, hi)
    return total


@dataclass(frozen=True)
class WorkCount:
    """What the reference does in one forward: its FLOPs and its minimal bytes (JSON for the worker)."""

    flop_count: FlopCount
    min_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"flop_count": self.flop_count.to_json(), "min_bytes": self.min_bytes}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkCount:
        return cls(FlopCount.from_json(data["flop_count"]), int(data["min_bytes"]))


def count_work(model: torch.nn.Module, inputs: Sequence[object]) -> WorkCount:
    """One counted forward: FLOPs, and min bytes over inputs, the output, and parameters and buffers."""
    flop_count, out = count_flops_and_output(model, inputs)
    tensors = [*model.parameters(), *model.buffers()]
    return WorkCount(flop_count, min_bytes(inputs, out, tensors))


def _rate(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


@dataclass(frozen=True)
class Roofline:
    """A problem's roofline on one GPU, and (when timed) where a kernel stands against it."""

    flop_count: FlopCount
    min_bytes: int
    arithmetic_intensity_flops_per_byte: float | None  # None when no bytes move
    dtype: str  # the dominant compute dtype, "float16"
    compute_ceiling: str  # which ceiling: "fp32", "tf32", "fp16", "bf16", "fp8"
    peak_flops_per_s: float
    peak_flops_source: str  # "measured" or "datasheet"
    bandwidth_bytes_per_s: float
    bandwidth_source: str
    compute_time_ms: float  # flops / peak
    memory_time_ms: float  # min_bytes / bandwidth
    sol_time_ms: float  # speed of light: the larger of the two
    bound_by: str  # "memory" or "compute": the larger term
    measured_time_ms: float | None  # None without a GPU timing
    achieved_bytes_per_s: float | None
    achieved_flops_per_s: float | None
    pct_of_peak: float | None  # of the ceiling named by bound_by
    headroom: float | None  # measured / speed of light; 1.0 is perfect
    bottleneck: str | None  # "memory_bound", "compute_bound", "latency_bound", "under_utilised"
    evidence: tuple[str, ...]  # sentences with the numbers behind the bottleneck

    @property
    def flops(self) -> int:
        return self.flop_count.total_flops

    def to_json(self) -> dict[str, Any]:
        return {
            "flops": self.flops,
            "min_bytes": self.min_bytes,
            "arithmetic_intensity": self.arithmetic_intensity_flops_per_byte,
            "sol_time_ms": self.sol_time_ms,
            "bottleneck": self.bottleneck,
            "headroom": self.headroom,
            "dtype": self.dtype,
            "compute_ceiling": self.compute_ceiling,
            "peak_flops_per_s": self.peak_flops_per_s,
            "peak_flops_source": self.peak_flops_source,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "bandwidth_source": self.bandwidth_source,
            "compute_time_ms": self.compute_time_ms,
            "memory_time_ms": self.memory_time_ms,
            "bound_by": self.bound_by,
            "measured_time_ms": self.measured_time_ms,
            "achieved_bytes_per_s": self.achieved_bytes_per_s,
            "achieved_flops_per_s": self.achieved_flops_per_s,
            "pct_of_peak": self.pct_of_peak,
            "evidence": list(self.evidence),
            "flops_by_rule": [r._asdict() for r in self.flop_count.by_rule],
        }


def analyse(
    flop_count: FlopCount,
    min_bytes: int,
    dtype: torch.dtype | None,
    ceilings: Ceilings,
    measured_time_ms: float | None,
    launch_overhead_ms: float = 0.005,
) -> Roofline:
    """The roofline of ``flop_count`` and ``min_bytes``, and the bottleneck of a kernel timed at ``measured_time_ms``.

    ``dtype`` None takes the count's dominant dtype. fp32 runs against the plain fp32 rate (the
    evaluator turns TF32 off); fp16, bf16 and fp8 against their tensor-core rate. Bottleneck rules,
    first match wins:

    1. nothing measured: None;
    2. achieved >= ACHIEVED_FRACTION_BOUND of the ceiling whose term is larger: memory_bound or compute_bound;
    3. measured < LATENCY_BOUND_MS, or the speed-of-light time is under one launch overhead: latency_bound;
    4. otherwise under_utilised: neither ceiling is approached and the call is long enough to.
    """
    if dtype is None:
        named = getattr(torch, flop_count.dtype, None)
        dtype = named if isinstance(named, torch.dtype) else torch.float32
    compute = ceilings.compute_for(dtype, tensor_cores=dtype != torch.float32)
    flops = flop_count.total_flops
    compute_ms = flops / compute.flops_per_s * 1e3
    memory_ms = min_bytes / ceilings.bandwidth_bytes_per_s * 1e3
    sol_ms = max(compute_ms, memory_ms)
    bound_by = "compute" if compute_ms > memory_ms else "memory"
    intensity = flops / min_bytes if min_bytes else None
    ridge = compute.flops_per_s / ceilings.bandwidth_bytes_per_s
    shown = "n/a" if intensity is None else f"{intensity:.3g}"
    evidence = [
        f"{flops:,} FLOP over {min_bytes:,} bytes: arithmetic intensity {shown} FLOP/byte against a ridge point "
        f"of {ridge:.3g}, so the {bound_by} term sets the speed-of-light time ({sol_ms:.4g} ms)"
    ]
    roof = Roofline(
        flop_count=flop_count,
        min_bytes=min_bytes,
        arithmetic_intensity_flops_per_byte=intensity,
        dtype=str(dtype).removeprefix("torch."),
        compute_ceiling=compute.key,
        peak_flops_per_s=compute.flops_per_s,
        peak_flops_source=compute.source,
        bandwidth_bytes_per_s=ceilings.bandwidth_bytes_per_s,
        bandwidth_source=ceilings.bandwidth_source,
        compute_time_ms=compute_ms,
        memory_time_ms=memory_ms,
        sol_time_ms=sol_ms,
        bound_by=bound_by,
        measured_time_ms=None,
        achieved_bytes_per_s=None,
        achieved_flops_per_s=None,
        pct_of_peak=None,
        headroom=None,
        bottleneck=None,
        evidence=tuple(evidence),
    )
    if measured_time_ms is None or measured_time_ms <= 0:
        return roof
    seconds = measured_time_ms / 1e3
    mem_frac, cmp_frac = memory_ms / measured_time_ms, compute_ms / measured_time_ms
    bw_source = "measured copy" if ceilings.bandwidth_source == "measured" else "datasheet"
    rate_source = f"measured {compute.key} matmul" if compute.source == "measured" else f"datasheet {compute.key}"
    evidence += [
        f"achieved {_rate(min_bytes / seconds, 'B/s')} = {100 * mem_frac:.0f}% of the "
        f"{_rate(ceilings.bandwidth_bytes_per_s, 'B/s')} {bw_source} bandwidth",
        f"achieved {_rate(flops / seconds, 'FLOP/s')} = {100 * cmp_frac:.0f}% of the "
        f"{_rate(compute.flops_per_s, 'FLOP/s')} {rate_source} rate",
    ]
    frac = max(mem_frac, cmp_frac)  # the fraction of the ceiling named by bound_by
    threshold = f"{100 * ACHIEVED_FRACTION_BOUND:.0f}%"
    if frac >= ACHIEVED_FRACTION_BOUND:
        bottleneck = f"{bound_by}_bound"
        evidence.append(f"{100 * frac:.0f}% of the {bound_by} ceiling is at or above the {threshold} threshold")
    elif measured_time_ms < LATENCY_BOUND_MS:
        bottleneck = "latency_bound"
        evidence.append(
            f"neither ceiling reaches {threshold}, and {1e3 * measured_time_ms:.3g} us is under the "
            f"{1e3 * LATENCY_BOUND_MS:.3g} us latency threshold: launch and sync costs are a large share"
        )
    elif sol_ms < launch_overhead_ms:
        bottleneck = "latency_bound"
        evidence.append(
            f"neither ceiling reaches {threshold}, and the speed-of-light time ({1e3 * sol_ms:.3g} us) is under "
            f"one launch overhead ({1e3 * launch_overhead_ms:.3g} us): fixed costs, not throughput, set the time"
        )
    else:
        bottleneck = "under_utilised"
        evidence.append(
            f"neither ceiling reaches {threshold}, though at {measured_time_ms:.4g} ms the call is long enough to: "
            "the GPU is under-utilised"
        )
    return replace(
        roof,
        measured_time_ms=measured_time_ms,
        achieved_bytes_per_s=min_bytes / seconds,
        achieved_flops_per_s=flops / seconds,
        pct_of_peak=100 * frac,
        headroom=measured_time_ms / sol_ms if sol_ms > 0 else None,
        bottleneck=bottleneck,
        evidence=tuple(evidence),
    )
