"""The critic's next steps: one for the bottleneck's gap and one per signal, ranked, each pointing at skills.

Each step names the measurement behind it, and takes the skills whose match reasons fit it: a signal's
step the skills matched for that signal, the gap's step the skills matched for the bottleneck that no
signal's step took. The order is a fixed table per bottleneck (below) rather than an estimate, so that
a user can predict it; it puts first the lever that typically buys most in that regime.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from openkernel.critic.facts import (
    HIGH_REGISTERS_PER_THREAD,
    HIGH_STALL_PCT,
    L2_HIT_POOR_PCT,
    LOW_DRAM_THROUGHPUT_PCT,
    LOW_OCCUPANCY_PCT,
    LOW_TENSOR_PIPE_PCT,
    SMALL_PROBLEM_SOL_MS,
    TENSOR_OP_CLASSES,
    Facts,
    pct_text,
    times_text,
)
from openkernel.critic.model import KernelMetrics, NextStep
from openkernel.skills.library import Skill
from openkernel.skills.matcher import SIGNAL_WEIGHT, MatchQuery, SkillMatch, match_skills

__all__ = ["GENERIC_STEPS", "MAX_STEPS", "SKILLS_PER_STEP", "next_steps"]

MAX_STEPS = 5  # profile-driven steps in one diagnosis
SKILLS_PER_STEP = 3  # skills one step points at, best match first
GENERIC_STEPS = 3  # op-class suggestions added when nothing says what bounds the kernel
_MATCH_LIMIT = 1000  # ask the matcher for every skill that scores; the steps filter them

# Per bottleneck, the steps that lead ("gap" is the bottleneck's own step); the others follow in _TAIL order.
_LEAD: dict[str, tuple[str, ...]] = {
    # The headroom to the bandwidth ceiling is the whole prize; then what wastes bandwidth.
    "memory_bound": ("gap", "low_dram_throughput", "low_l2_hit", "register_spills"),
    # Idle tensor cores are an 8-16x lever over the CUDA cores; then the gap to the compute ceiling.
    "compute_bound": ("low_tensor_pipe", "gap"),
    # Fixed per-call costs set the time: fewer launches first, then less fixed work.
    "latency_bound": ("many_launches", "small_problem", "gap"),
    # Too few warps in flight: raise them first; the gap step is what is left.
    "under_utilised": ("low_occupancy", "high_registers", "register_spills", "small_problem", "low_dram_throughput"),
}
# The gap's step ranks the bottleneck's skills as if these signals, which describe the gap itself, had been
# measured too (SIGNAL_WEIGHT each), so that the bandwidth gap points at streaming techniques first.
_GAP_SIGNALS: dict[str, set[str]] = {
    "memory_bound": {"low_dram_throughput", "uncoalesced", "high_stall_memory"},
    "compute_bound": {"low_tensor_pipe"},
    "latency_bound": {"many_launches", "small_problem"},
    "under_utilised": {"low_occupancy", "tail_effect", "small_problem"},
}
_TAIL = (
    "register_spills",
    "low_occupancy",
    "high_registers",
    "low_dram_throughput",
    "low_l2_hit",
    "high_stall_memory",
    "high_stall_barrier",
    "low_tensor_pipe",
    "many_launches",
    "small_problem",
)


@dataclass(frozen=True)
class _Draft:
    title: str
    why: str
    effect: str
    fits: tuple[str, ...]  # the match reasons ("signal low_l2_hit") of the skills this step points at

    @property
    def gap(self) -> bool:
        """The bottleneck's own step: it takes the bottleneck's skills that no signal's step shows."""
        return self.fits[0].startswith("bottleneck ")


def _by_gap(matches: Sequence[SkillMatch], bottleneck: str | None) -> list[SkillMatch]:
    """``matches`` re-ranked as if the bottleneck's gap signals had been measured too (a stable sort)."""
    gap = _GAP_SIGNALS.get(bottleneck or "", set())
    return sorted(matches, key=lambda m: -(m.score + SIGNAL_WEIGHT * len(gap & set(m.skill.signals))))


def _fitting(matches: Sequence[SkillMatch], fits: tuple[str, ...], taken: set[str]) -> tuple[str, ...]:
    return tuple(m.skill.id for m in matches if set(m.because) & set(fits) and m.skill.id not in taken)[
        :SKILLS_PER_STEP
    ]


def _gap(facts: Facts) -> _Draft | None:
    roof, bottleneck = facts.roofline, facts.bottleneck
    if roof is None or roof.measured_time_ms is None or roof.pct_of_peak is None or bottleneck is None:
        return None
    pct, measured, sol = pct_text(roof.pct_of_peak), roof.measured_time_ms, roof.sol_time_ms
    fits = (f"bottleneck {bottleneck}",)
    if bottleneck == "memory_bound":
        return _Draft(
            f"Close the bandwidth gap: {pct} of peak bandwidth, {times_text(roof.headroom)} headroom",
            f"memory_bound: {measured:.4g} ms against a {sol:.4g} ms speed of light for {roof.min_bytes:,} bytes "
            f"at {roof.bandwidth_bytes_per_s / 1e12:.3g} TB/s",
            f"up to {times_text(roof.headroom)} (the headroom)",
            fits,
        )
    if bottleneck == "compute_bound":
        return _Draft(
            f"Close the compute gap: {pct} of the {roof.compute_ceiling} peak, {times_text(roof.headroom)} headroom",
            f"compute_bound: {measured:.4g} ms against a {sol:.4g} ms speed of light for {roof.flops:,} FLOP "
            f"at {roof.peak_flops_per_s / 1e12:.3g} TFLOP/s ({roof.compute_ceiling})",
            f"up to {times_text(roof.headroom)} (the headroom)",
            fits,
        )
    if bottleneck == "latency_bound":
        return _Draft(
            f"Cut fixed per-call costs: {1e3 * measured:.3g} us per call for {1e3 * sol:.3g} us of work",
            f"latency_bound: {pct} of the {roof.bound_by} ceiling in a {1e3 * measured:.3g} us call",
            "fewer microseconds of launch and sync per call",
            fits,
        )
    return _Draft(
        f"Put more of the GPU to work: {pct} of the {roof.bound_by} ceiling, {times_text(roof.headroom)} headroom",
        f"under_utilised: {measured:.4g} ms is long enough to reach a ceiling, yet it reaches {pct} of the "
        f"{roof.bound_by} ceiling",
        f"up to {times_text(roof.headroom)} (the headroom)",
        fits,
    )


def _draft(key: str, facts: Facts) -> _Draft | None:
    """The step for ``key`` (a signal, or "gap"), or None when it does not apply."""
    if key == "gap":
        return _gap(facts)
    if key not in facts.signals:
        return None
    k, roof, fits = facts.kernel or KernelMetrics(), facts.roofline, (f"signal {key}",)
    regs, occupancy = k.registers_per_thread, k.achieved_occupancy_pct
    if key == "low_occupancy" and "high_registers" in facts.signals:
        return _Draft(
            f"Raise occupancy: {regs} registers/thread limit it to {occupancy:.0f}%",
            f"achieved occupancy {occupancy:.0f}% is under {LOW_OCCUPANCY_PCT:.0f}% of peak warps, and {regs} "
            f"registers/thread is over {HIGH_REGISTERS_PER_THREAD}",
            "more warps in flight to hide latency",
            (*fits, "signal high_registers"),
        )
    if key == "high_registers" and "low_occupancy" in facts.signals:
        return None  # the occupancy step above covers it
    theory = k.theoretical_occupancy_pct
    sol_us = 0.0 if roof is None else 1e3 * roof.sol_time_ms
    classes = "/".join(facts.op_classes) or "this"
    texts: dict[str, tuple[str, str, str]] = {
        "low_occupancy": (
            f"Raise occupancy: {occupancy or 0:.0f}% of peak warps resident",
            f"achieved occupancy {occupancy or 0:.0f}% is under {LOW_OCCUPANCY_PCT:.0f}% of peak warps"
            + (f" (theoretical {theory:.0f}%)" if theory is not None else ""),
            "more warps in flight to hide latency",
        ),
        "high_registers": (
            f"Cut register pressure: {regs} registers/thread",
            f"{regs} registers/thread is over {HIGH_REGISTERS_PER_THREAD}: fewer warps fit on an SM",
            "more resident warps",
        ),
        "register_spills": (
            f"Stop register spills: {k.spill_bytes or 0:,} bytes go to local memory",
            f"{k.spill_bytes or 0:,} bytes of spills add hidden global-memory traffic",
            "no local-memory traffic",
        ),
        "low_l2_hit": (
            f"Raise the L2 hit rate: {k.l2_hit_rate_pct or 0:.0f}% of requests hit",
            f"L2 hit rate {k.l2_hit_rate_pct or 0:.0f}% is under {L2_HIT_POOR_PCT:.0f}%: "
            "reusable data is fetched from DRAM again",
            "fewer DRAM bytes per call",
        ),
        "low_dram_throughput": (
            f"Stream memory faster: DRAM throughput {facts.dram_pct or 0:.0f}% of peak",
            f"DRAM throughput {facts.dram_pct or 0:.0f}% is under {LOW_DRAM_THROUGHPUT_PCT:.0f}% on a problem "
            "whose memory term sets the speed of light",
            "closer to peak bandwidth",
        ),
        "low_tensor_pipe": (
            f"Use the tensor cores: tensor pipe active {k.tensor_pipe_active_pct or 0:.0f}% of cycles",
            f"tensor pipe active {k.tensor_pipe_active_pct or 0:.0f}% is under {LOW_TENSOR_PIPE_PCT:.0f}% on a "
            f"{classes} problem whose compute term sets the speed of light",
            "up to the tensor-core rate",
        ),
        "high_stall_memory": (
            f"Hide memory latency: memory stalls are {facts.memory_stall_pct or 0:.0f}% of warp states",
            f"memory stalls {facts.memory_stall_pct or 0:.0f}% are over {HIGH_STALL_PCT:.0f}%: warps wait on loads",
            "more loads in flight per warp",
        ),
        "high_stall_barrier": (
            f"Cut barrier waits: barrier stalls are {facts.barrier_stall_pct or 0:.0f}% of warp states",
            f"barrier stalls {facts.barrier_stall_pct or 0:.0f}% are over {HIGH_STALL_PCT:.0f}%: "
            "warps wait for each other",
            "fewer block-wide syncs",
        ),
        "many_launches": (
            f"Fuse the launches: {facts.launches} kernels per forward into one",
            f"{facts.launches} launches per forward for {classes}: each adds a gap of a few microseconds",
            f"up to {(facts.launches or 1) - 1} of {facts.launches} launch gaps saved per call",
        ),
        "small_problem": (
            f"Cut fixed costs: the whole problem needs {sol_us:.3g} us at speed of light",
            f"speed-of-light time {sol_us:.3g} us is under {1e3 * SMALL_PROBLEM_SOL_MS:.3g} us: launch overhead "
            "and idle SMs dominate",
            "fewer microseconds of overhead per call",
        ),
    }
    if key not in texts:
        return None
    title, why, effect = texts[key]
    return _Draft(title, why, effect, fits)


def next_steps(
    facts: Facts, hardware: str | None, backend: str | None, skills: Sequence[Skill] | None
) -> tuple[NextStep, ...]:
    """Ranked steps from the bottleneck and signals; op-class suggestions too when the bottleneck is unknown."""
    query = MatchQuery(facts.op_classes, facts.bottleneck, facts.signals, hardware, backend)
    matches = match_skills(query, skills, limit=_MATCH_LIMIT)
    lead = _LEAD.get(facts.bottleneck or "", ())
    order = dict.fromkeys((*lead, *_TAIL, "gap"))
    drafts = [d for key in order if (d := _draft(key, facts)) is not None][:MAX_STEPS]
    ids = [() if d.gap else _fitting(matches, d.fits, set()) for d in drafts]
    claimed = {i for shown in ids for i in shown}
    gap_matches = _by_gap(matches, facts.bottleneck)
    ids = [_fitting(gap_matches, d.fits, claimed) if d.gap else shown for d, shown in zip(drafts, ids, strict=True)]
    steps = [
        NextStep(d.title, d.why, shown, d.effect, rank, True)
        for rank, (d, shown) in enumerate(zip(drafts, ids, strict=True), start=1)
    ]
    if facts.bottleneck is None:
        used = {i for s in steps for i in s.skill_ids}
        steps += _generic(facts, hardware, backend, skills, used, len(steps))
    return tuple(steps)


def _generic(
    facts: Facts,
    hardware: str | None,
    backend: str | None,
    skills: Sequence[Skill] | None,
    used: set[str],
    ranked: int,
) -> list[NextStep]:
    """Suggestions for the op class with no measurement behind them, under the bottleneck the problem implies.

    That is the roofline's larger term when there is an analytic roofline; else compute_bound for a
    matmul, conv or attention problem and memory_bound for the rest. They are ranked as that bottleneck's
    gap step ranks its skills.
    """
    roof, classes = facts.roofline, facts.op_classes
    if roof is not None:
        prior: str | None = f"{roof.bound_by}_bound"
        basis = f"the {roof.bound_by} term sets the speed of light ({roof.sol_time_ms:.4g} ms)"
    elif classes:
        prior = "compute_bound" if TENSOR_OP_CLASSES & set(classes) else "memory_bound"
        basis = f"{'/'.join(classes)} problems are usually {prior}"
    else:
        prior, basis = None, "nothing is known of the problem"
    matches = _by_gap(
        match_skills(MatchQuery(classes, prior, (), hardware, backend), skills, limit=_MATCH_LIMIT), prior
    )
    fresh = [m for m in matches if m.skill.id not in used][:GENERIC_STEPS]
    return [
        NextStep(
            m.skill.title,
            f"not profile-driven: no GPU profile, and {basis} (matched {', '.join(m.because)})",
            (m.skill.id,),
            m.skill.typical_effect,
            ranked + i,
            False,
        )
        for i, m in enumerate(fresh, start=1)
    ]
