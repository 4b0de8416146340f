"""From a snapshot's numbers to the critic's facts: signals by stated thresholds, evidence, headline, changes.

Every signal is an explicit comparison against a named constant below, so that a user reading
"low_l2_hit" can check it against the number printed beside it. Signals are only raised where the
inputs can support them: a roofline, the ncu metrics of the kernel that takes longest, and launch counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from openkernel.critic.model import KernelMetrics, Snapshot
from openkernel.profile.roofline import Roofline
from openkernel.skills.library import SIGNALS

__all__ = [
    "FUSIBLE_OP_CLASSES",
    "HIGH_REGISTERS_PER_THREAD",
    "HIGH_STALL_PCT",
    "L2_HIT_GOOD_PCT",
    "L2_HIT_POOR_PCT",
    "LOW_DRAM_THROUGHPUT_PCT",
    "LOW_OCCUPANCY_PCT",
    "LOW_TENSOR_PIPE_PCT",
    "MANY_LAUNCHES_PER_FORWARD",
    "MAX_FUSED_LAUNCHES_PER_FORWARD",
    "SMALL_PROBLEM_SOL_MS",
    "SPILL_BYTES_LIMIT",
    "TENSOR_OP_CLASSES",
    "Facts",
    "changes",
    "headline",
    "pct_text",
    "times_text",
]

# L2 hit rate, percent of L2 requests: under POOR raises low_l2_hit and reads "(poor)"; from POOR up to
# GOOD reads "(ok)"; at or above GOOD "(good)" (tiled kernels that reuse well reach 80-95%).
L2_HIT_POOR_PCT = 50.0
L2_HIT_GOOD_PCT = 80.0
# Achieved occupancy, percent of the SM's peak resident warps: under this, too few warps hide latency.
LOW_OCCUPANCY_PCT = 40.0
# Registers per thread (of at most 255): at 128, an SM's 65,536 registers hold 512 threads, 16 of the 64
# warps an sm_80/sm_90 SM can keep resident (25%); above it, fewer still.
HIGH_REGISTERS_PER_THREAD = 128
# Register-spill bytes to local memory, as ncu or the target compile reports them: any at all is hidden
# global-memory traffic.
SPILL_BYTES_LIMIT = 0
# Percent of peak DRAM bandwidth (ncu's figure, else the roofline's useful bytes / time): under this, on a
# problem whose memory term sets the speed of light and that is memory_bound or under_utilised, the kernel
# does not stream memory as it could.
LOW_DRAM_THROUGHPUT_PCT = 60.0
# Percent of cycles the tensor-core pipe is active: under this, on a matmul, conv or attention problem
# whose compute term sets the speed of light, the tensor cores sit idle.
LOW_TENSOR_PIPE_PCT = 30.0
TENSOR_OP_CLASSES = frozenset({"matmul", "conv", "attention"})
# Kernel launches per forward: a chain of these classes fits in one kernel, so more than one is too many;
# any other problem gets MANY_LAUNCHES_PER_FORWARD (each launch costs a few microseconds of gap).
FUSIBLE_OP_CLASSES = frozenset({"elementwise", "reduction", "softmax", "norm"})
MAX_FUSED_LAUNCHES_PER_FORWARD = 1
MANY_LAUNCHES_PER_FORWARD = 4
# Speed-of-light time under 10 us: too little work to fill every SM past the launch overhead.
SMALL_PROBLEM_SOL_MS = 0.010
# Percent of warp states in one category (ncu's reason names, matched as substrings so full metric
# names also match): over this, that wait dominates the kernel.
HIGH_STALL_PCT = 30.0
MEMORY_STALLS = ("long_scoreboard", "lg_throttle")  # waiting on global or local memory
BARRIER_STALLS = ("barrier", "membar")  # waiting at __syncthreads or a memory fence


def pct_text(value: float | None) -> str:
    """A percentage as a user reads it: whole numbers, two figures under 1% ("0.068%")."""
    if value is None:
        return "—"
    return f"{value:.2g}%" if 0 < value < 1 else f"{value:.0f}%"


def times_text(value: float | None) -> str:
    """A headroom: "~1.4x" under 10x, "~1465x" above."""
    if value is None:
        return "—"
    return f"~{value:.1f}x" if value < 10 else f"~{value:.0f}x"


def _ms(value: float) -> str:
    return f"{value:.4g}"


@dataclass(frozen=True)
class Facts:
    """The numbers one diagnosis rests on, with the signals they raise and the evidence that says why."""

    roofline: Roofline | None
    kernel: KernelMetrics | None  # the kernel that takes longest (the first, when none is timed)
    launches: int | None  # per forward, all kernels together
    op_classes: tuple[str, ...]
    bottleneck: str | None
    dram_pct: float | None  # ncu's DRAM throughput, else the roofline's achieved bandwidth
    memory_stall_pct: float | None
    barrier_stall_pct: float | None
    signals: tuple[str, ...]
    evidence: tuple[str, ...]

    @classmethod
    def of(cls, snap: Snapshot, op_classes: tuple[str, ...]) -> Facts:
        roof = snap.roofline
        measured = roof is not None and roof.measured_time_ms is not None
        bottleneck = roof.bottleneck if roof is not None and measured else None
        kernel = max(snap.kernels, key=lambda k: k.duration_ms or 0.0) if snap.kernels else None
        known = [k.launches for k in snap.kernels if k.launches is not None]
        launches = sum(known) if known else None
        k = kernel or KernelMetrics()
        dram = k.dram_throughput_pct
        if dram is None and roof is not None and roof.achieved_bytes_per_s is not None:
            dram = 100 * roof.achieved_bytes_per_s / roof.bandwidth_bytes_per_s
        stalls = {name: _stall_share(k.top_stalls, name) for name in ("memory", "barrier")}
        signals: set[str] = set()
        lines: list[str] = [*roof.evidence] if roof is not None and measured else []

        def note(line: str, signal: str | None, fires: bool) -> None:
            if signal is not None and fires:
                signals.add(signal)
                line = f"{line}: {signal}"
            lines.append(line)

        low_dram = roof is not None and roof.bound_by == "memory" and bottleneck in ("memory_bound", "under_utilised")
        low_dram = low_dram and dram is not None and dram < LOW_DRAM_THROUGHPUT_PCT
        if k.dram_throughput_pct is not None or low_dram:  # the roofline's own figure is in its evidence already
            where = f", under {LOW_DRAM_THROUGHPUT_PCT:.0f}% on a problem whose memory term sets the speed of light"
            note(
                f"DRAM throughput {pct_text(dram)} of peak" + (where if low_dram else ""),
                "low_dram_throughput",
                low_dram,
            )
        if k.l2_hit_rate_pct is not None:
            fires = k.l2_hit_rate_pct < L2_HIT_POOR_PCT
            under = f", under {L2_HIT_POOR_PCT:.0f}%" if fires else ""
            note(f"L2 hit rate {pct_text(k.l2_hit_rate_pct)}{under}", "low_l2_hit", fires)
        if k.l1_hit_rate_pct is not None:
            note(f"L1 hit rate {pct_text(k.l1_hit_rate_pct)}", None, False)
        if k.achieved_occupancy_pct is not None:
            fires = k.achieved_occupancy_pct < LOW_OCCUPANCY_PCT
            theory = k.theoretical_occupancy_pct
            text = f"achieved occupancy {pct_text(k.achieved_occupancy_pct)} of peak warps"
            text += f" (theoretical {pct_text(theory)})" if theory is not None else ""
            note(text + (f", under {LOW_OCCUPANCY_PCT:.0f}%" if fires else ""), "low_occupancy", fires)
        if k.sm_throughput_pct is not None:
            note(f"SM throughput {pct_text(k.sm_throughput_pct)} of peak", None, False)
        if k.tensor_pipe_active_pct is not None:
            fires = bool(TENSOR_OP_CLASSES & set(op_classes)) and roof is not None and roof.bound_by == "compute"
            fires = fires and k.tensor_pipe_active_pct < LOW_TENSOR_PIPE_PCT
            where = f", under {LOW_TENSOR_PIPE_PCT:.0f}% on a problem whose compute term sets the speed of light"
            note(
                f"tensor pipe active {pct_text(k.tensor_pipe_active_pct)} of cycles" + (where if fires else ""),
                "low_tensor_pipe",
                fires,
            )
        if k.registers_per_thread is not None:
            fires = k.registers_per_thread > HIGH_REGISTERS_PER_THREAD
            over = f", over {HIGH_REGISTERS_PER_THREAD}" if fires else ""
            note(f"{k.registers_per_thread} registers/thread{over}", "high_registers", fires)
        if k.spill_bytes is not None:
            fires = k.spill_bytes > SPILL_BYTES_LIMIT
            note(f"{k.spill_bytes:,} bytes of register spills to local memory", "register_spills", fires)
        if k.shared_bytes_per_block is not None:
            note(f"{k.shared_bytes_per_block:,} bytes of shared memory per block", None, False)
        for category, signal in (("memory", "high_stall_memory"), ("barrier", "high_stall_barrier")):
            share = stalls[category]
            if share:  # profiled, and some of the top stalls are of this category
                fires = share > HIGH_STALL_PCT
                names = ", ".join(f"{n} {pct_text(p)}" for n, p in k.top_stalls if _category(n) == category)
                over = f", over {HIGH_STALL_PCT:.0f}%" if fires else ""
                note(f"{category} stalls {pct_text(share)} of warp states ({names}){over}", signal, fires)
        if launches is not None:
            limit = _launch_limit(op_classes)
            fires = launches > limit
            over = f", over {limit} for {'/'.join(op_classes) or 'this problem'}" if fires else ""
            plural = "es" if launches != 1 else ""
            note(f"{launches} kernel launch{plural} per forward{over}", "many_launches", fires)
        if roof is not None and roof.sol_time_ms < SMALL_PROBLEM_SOL_MS:
            sol_us = f"{1e3 * roof.sol_time_ms:.3g} us"
            note(f"speed-of-light time {sol_us}, under {1e3 * SMALL_PROBLEM_SOL_MS:.3g} us", "small_problem", True)
        return cls(
            roofline=roof,
            kernel=kernel,
            launches=launches,
            op_classes=op_classes,
            bottleneck=bottleneck,
            dram_pct=dram,
            memory_stall_pct=stalls["memory"],
            barrier_stall_pct=stalls["barrier"],
            signals=tuple(s for s in SIGNALS if s in signals),
            evidence=tuple(lines),
        )


def _category(reason: str) -> str | None:
    name = reason.lower()
    if any(m in name for m in MEMORY_STALLS):
        return "memory"
    if any(b in name for b in BARRIER_STALLS):
        return "barrier"
    return None


def _stall_share(stalls: tuple[tuple[str, float], ...], category: str) -> float | None:
    """The category's share of warp states; None when no stalls were profiled."""
    if not stalls:
        return None
    return sum(pct for name, pct in stalls if _category(name) == category)


def _launch_limit(op_classes: tuple[str, ...]) -> int:
    if op_classes and set(op_classes) <= FUSIBLE_OP_CLASSES:
        return MAX_FUSED_LAUNCHES_PER_FORWARD
    return MANY_LAUNCHES_PER_FORWARD


def headline(facts: Facts) -> str:
    """ "Bottleneck: memory_bound · Bandwidth: 72% of peak · L2 hit: 45% (poor) · Occupancy: 0.78 · Headroom: ~1.4x"."""
    roof, k = facts.roofline, facts.kernel or KernelMetrics()
    compute = roof is not None and roof.bound_by == "compute"
    if roof is not None and roof.pct_of_peak is not None:
        peak = f"{pct_text(roof.pct_of_peak)} of peak"
    else:
        fallback = k.sm_throughput_pct if compute else k.dram_throughput_pct
        peak = "—" if fallback is None else f"{fallback:.0f}% of peak"
    l2 = k.l2_hit_rate_pct
    grade = "good"
    if l2 is not None and l2 < L2_HIT_GOOD_PCT:
        grade = "poor" if l2 < L2_HIT_POOR_PCT else "ok"
    occupancy = k.achieved_occupancy_pct
    headroom = roof.headroom if roof is not None else None
    return " · ".join(
        (
            f"Bottleneck: {facts.bottleneck or '—'}",
            f"{'Compute' if compute else 'Bandwidth'}: {peak}",
            f"L2 hit: {'—' if l2 is None else f'{l2:.0f}% ({grade})'}",
            f"Occupancy: {'—' if occupancy is None else f'{occupancy / 100:.2f}'}",
            f"Headroom: {times_text(headroom)}",
        )
    )


def _kernel(field: str) -> Callable[[Facts], float | None]:
    def get(facts: Facts) -> float | None:
        value = None if facts.kernel is None else getattr(facts.kernel, field)
        return None if value is None else float(value)

    return get


# What changes are reported, in order: (label, the value, its format, its unit, which way is better:
# 1 up, -1 down, 0 neither; the highlight's verb). Reported when both are known and print differently.
_CHANGES: tuple[tuple[str, Callable[[Facts], float | None], str, str, int, str], ...] = (
    ("L2 hit rate", _kernel("l2_hit_rate_pct"), "{:.0f}%", "", 1, "improved to"),
    ("DRAM throughput", lambda f: f.dram_pct, "{:.0f}%", " of peak", 1, "improved to"),
    ("achieved occupancy", _kernel("achieved_occupancy_pct"), "{:.0f}%", "", 1, "improved to"),
    ("tensor pipe activity", _kernel("tensor_pipe_active_pct"), "{:.0f}%", "", 1, "improved to"),
    ("spills", _kernel("spill_bytes"), "{:,.0f}", " bytes", -1, "fell to"),
    ("launches", lambda f: None if f.launches is None else float(f.launches), "{:.0f}", "/forward", -1, "fell to"),
    ("registers", _kernel("registers_per_thread"), "{:.0f}", "/thread", 0, ""),
)


def changes(now: Facts, snap: Snapshot, before: Facts, best: Snapshot) -> tuple[tuple[str, ...], str | None]:
    """What changed since the previous best, and the change worth saying first: an improved metric, else runtime."""
    lines: list[str] = []
    highlight: str | None = None
    if snap.status != best.status:
        lines.append(f"status {best.status} -> {snap.status}")
    runtime: str | None = None
    if snap.runtime_ms is not None and best.runtime_ms is not None and snap.runtime_ms > 0:
        ratio = best.runtime_ms / snap.runtime_ms
        lines.append(f"runtime {_ms(best.runtime_ms)} -> {_ms(snap.runtime_ms)} ms ({ratio:.2f}x)")
        verb = "improved" if ratio > 1 else "regressed" if ratio < 1 else "held"
        runtime = f"Runtime {verb} to {_ms(snap.runtime_ms)} ms ({ratio:.2f}x)"
    if now.bottleneck is not None and before.bottleneck is not None and now.bottleneck != before.bottleneck:
        lines.append(f"bottleneck {before.bottleneck} -> {now.bottleneck}")
    for label, get, form, unit, better, verb in _CHANGES:
        old, new = get(before), get(now)
        if old is None or new is None or form.format(old) == form.format(new):
            continue
        lines.append(f"{label} {form.format(old)} -> {form.format(new)}{unit}")
        if highlight is None and better * (new - old) > 0:
            highlight = f"{label[0].upper()}{label[1:]} {verb} {form.format(new)}{unit}"
    return tuple(lines), highlight or runtime
