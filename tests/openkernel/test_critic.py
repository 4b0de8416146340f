"""The rule critic on constructed profiles: bottleneck rules, evidence, signals, changes and ranked steps."""

from __future__ import annotations

import pytest

from openkernel.critic import (
    Critic,
    Diagnosis,
    KernelMetrics,
    NextStep,
    RuleCritic,
    ScriptedCritic,
    Snapshot,
    diagnose,
    op_classes_of,
    snapshot_of,
)
from openkernel.hardware import Ceilings, ComputeCeiling
from openkernel.profile import FlopCount, FlopRule, Roofline, analyse
from openkernel.skills import Skill, load_skills
from openkernel.types import EvalResult, EvalStatus, KernelLaunchCount, TargetCompile, TrialCheck

H200 = Ceilings(
    "H200",
    4.8e12,
    "datasheet",
    (ComputeCeiling("fp32", 67e12, "datasheet"), ComputeCeiling("fp16", 989.5e12, "datasheet")),
)


def _skill(skill_id: str, bottlenecks: tuple[str, ...], op_classes: tuple[str, ...], signals: tuple[str, ...]) -> Skill:
    return Skill(
        id=skill_id,
        title=f"Title of {skill_id}",
        summary="s.",
        what="w",
        why="y",
        typical_effect=f"effect of {skill_id}",
        bottlenecks=bottlenecks,
        op_classes=op_classes,
        signals=signals,
        hardware=("any",),
        backends=("triton",),
        triton_example="pass\n",
        cuda_example=None,
    )


# A small library, so that which skill lands on which step can be worked out by hand (matcher weights:
# bottleneck 3, signal 2, op class 2, "any" op class 1; the gap's step adds 2 per gap signal).
TOY = (
    _skill(
        "stream-faster", ("memory_bound",), ("elementwise", "reduction", "softmax", "norm"), ("low_dram_throughput",)
    ),
    _skill("cache-hints", ("memory_bound",), ("any",), ("low_l2_hit",)),
    _skill("in-flight-loads", ("memory_bound", "under_utilised"), ("any",), ("high_stall_memory",)),
    _skill("softmax-online", ("memory_bound",), ("softmax",), ()),
    _skill(
        "occupancy-tuning",
        ("under_utilised", "latency_bound"),
        ("any",),
        ("low_occupancy", "high_registers", "register_spills"),
    ),
    _skill("persistent-grid", ("under_utilised",), ("any",), ("tail_effect",)),
    _skill("tensor-cores", ("compute_bound",), ("matmul",), ("low_tensor_pipe",)),
    _skill("matmul-tiling", ("compute_bound",), ("matmul",), ()),
    _skill("fuse-kernels", ("memory_bound", "latency_bound"), ("any",), ("many_launches",)),
    _skill("launch-graphs", ("latency_bound",), ("any",), ("many_launches", "small_problem")),
)

SOFTMAX_FLOPS = FlopCount(300_000_000, (FlopRule("softmax", "aten._softmax", 300_000_000),), "float32")
SOFTMAX_BYTES = 480_000_000  # 0.1 ms at 4.8 TB/s


def _softmax_roofline(measured_ms: float | None) -> Roofline:
    return analyse(SOFTMAX_FLOPS, SOFTMAX_BYTES, None, H200, measured_ms)


# --- (a) the seed's example: memory-bound softmax at 72% of bandwidth ----------------------------------


def test_memory_bound_softmax_is_the_seeds_example() -> None:
    roof = _softmax_roofline(0.1 / 0.72)
    kernel = KernelMetrics(name="softmax_kernel", l2_hit_rate_pct=45.0, achieved_occupancy_pct=78.0, launches=1)
    snap = Snapshot(3, "correct", 0.1 / 0.72, 1.5, roof, (kernel,))
    diagnosis = diagnose(snap, None, ("softmax",), backend="triton", skills=TOY)
    assert diagnosis == Diagnosis(
        bottleneck="memory_bound",
        headline="Bottleneck: memory_bound · Bandwidth: 72% of peak · L2 hit: 45% (poor) · Occupancy: 0.78 · "
        "Headroom: ~1.4x",
        evidence=(
            *roof.evidence,
            "L2 hit rate 45%, under 50%: low_l2_hit",
            "achieved occupancy 78% of peak warps",
            "1 kernel launch per forward",
        ),
        signals=("low_l2_hit",),
        changes=(),
        next_steps=(
            NextStep(
                "Close the bandwidth gap: 72% of peak bandwidth, ~1.4x headroom",
                "memory_bound: 0.1389 ms against a 0.1 ms speed of light for 480,000,000 bytes at 4.8 TB/s",
                ("stream-faster", "in-flight-loads", "softmax-online"),  # scores 5+2, 4+2, 5
                "up to ~1.4x (the headroom)",
                1,
                True,
            ),
            NextStep(
                "Raise the L2 hit rate: 45% of requests hit",
                "L2 hit rate 45% is under 50%: reusable data is fetched from DRAM again",
                ("cache-hints",),
                "fewer DRAM bytes per call",
                2,
                True,
            ),
        ),
        lead="Bottleneck memory_bound at 72% of the memory ceiling (~1.4x headroom)",
    )
    assert diagnosis.summary() == (
        "Bottleneck memory_bound at 72% of the memory ceiling (~1.4x headroom). "
        "Next: close the bandwidth gap: 72% of peak bandwidth, ~1.4x headroom."
    )


def test_headline_grades_the_l2_hit_rate() -> None:
    def l2_part(l2_pct: float) -> str:
        snap = Snapshot(1, "correct", 0.2, None, _softmax_roofline(0.2), (KernelMetrics(l2_hit_rate_pct=l2_pct),))
        return diagnose(snap, None, ("softmax",), skills=TOY).headline.split(" · ")[2]

    assert [l2_part(p) for p in (49.0, 50.0, 79.0, 80.0)] == [
        "L2 hit: 49% (poor)",
        "L2 hit: 50% (ok)",
        "L2 hit: 79% (ok)",
        "L2 hit: 80% (good)",
    ]


# --- (b) compute-bound matmul: idle tensor cores, high registers, spills --------------------------------

MATMUL_FLOPS = FlopCount(2 * 4096**3, (FlopRule("FlopCounterMode", "aten.mm", 2 * 4096**3),), "float16")
MATMUL_BYTES = 3 * 4096 * 4096 * 2


def test_compute_bound_matmul_with_idle_tensor_cores_and_spills() -> None:
    roof = analyse(MATMUL_FLOPS, MATMUL_BYTES, None, H200, 0.2)  # 0.1389 ms at 989.5 TFLOP/s: 69%
    kernel = KernelMetrics(
        name="matmul_kernel",
        achieved_occupancy_pct=22.0,
        theoretical_occupancy_pct=25.0,
        sm_throughput_pct=70.0,
        tensor_pipe_active_pct=20.0,
        registers_per_thread=168,
        spill_bytes=256,
        launches=1,
    )
    diagnosis = diagnose(Snapshot(2, "correct", 0.2, 3.0, roof, (kernel,)), None, ("matmul",), skills=TOY)
    assert diagnosis == Diagnosis(
        bottleneck="compute_bound",
        headline="Bottleneck: compute_bound · Compute: 69% of peak · L2 hit: — · Occupancy: 0.22 · Headroom: ~1.4x",
        evidence=(
            *roof.evidence,
            "achieved occupancy 22% of peak warps (theoretical 25%), under 40%: low_occupancy",
            "SM throughput 70% of peak",
            "tensor pipe active 20% of cycles, under 30% on a problem whose compute term sets the speed of light: "
            "low_tensor_pipe",
            "168 registers/thread, over 128: high_registers",
            "256 bytes of register spills to local memory: register_spills",
            "1 kernel launch per forward",
        ),
        signals=("low_occupancy", "register_spills", "high_registers", "low_tensor_pipe"),
        changes=(),
        next_steps=(
            NextStep(
                "Use the tensor cores: tensor pipe active 20% of cycles",
                "tensor pipe active 20% is under 30% on a matmul problem whose compute term sets the speed of light",
                ("tensor-cores",),
                "up to the tensor-core rate",
                1,
                True,
            ),
            NextStep(
                "Close the compute gap: 69% of the fp16 peak, ~1.4x headroom",
                "compute_bound: 0.2 ms against a 0.1389 ms speed of light for 137,438,953,472 FLOP at "
                "990 TFLOP/s (fp16)",
                ("matmul-tiling",),  # tensor-cores is the first step's
                "up to ~1.4x (the headroom)",
                2,
                True,
            ),
            NextStep(
                "Stop register spills: 256 bytes go to local memory",
                "256 bytes of spills add hidden global-memory traffic",
                ("occupancy-tuning",),
                "no local-memory traffic",
                3,
                True,
            ),
            NextStep(
                "Raise occupancy: 168 registers/thread limit it to 22%",
                "achieved occupancy 22% is under 40% of peak warps, and 168 registers/thread is over 128",
                ("occupancy-tuning",),
                "more warps in flight to hide latency",
                4,
                True,
            ),
        ),
        lead="Bottleneck compute_bound at 69% of the compute ceiling (~1.4x headroom)",
    )


# --- (c) latency-bound tiny elementwise chain, launched as two kernels -----------------------------------


def test_latency_bound_elementwise_with_several_launches() -> None:
    n = 4096
    flops = FlopCount(
        2 * n, (FlopRule("elementwise", "aten.add", n), FlopRule("elementwise", "aten.relu", n)), "float32"
    )
    roof = analyse(flops, 3 * n * 4, None, H200, 0.015)  # 0.0102 us of work in a 15 us call
    kernels = (KernelMetrics(name="add_kernel", launches=1), KernelMetrics(name="relu_kernel", launches=1))
    diagnosis = diagnose(Snapshot(5, "correct", 0.015, 0.9, roof, kernels), None, ("elementwise",), skills=TOY)
    assert diagnosis == Diagnosis(
        bottleneck="latency_bound",
        headline="Bottleneck: latency_bound · Bandwidth: 0.068% of peak · L2 hit: — · Occupancy: — · Headroom: ~1465x",
        evidence=(
            *roof.evidence,
            "2 kernel launches per forward, over 1 for elementwise: many_launches",
            "speed-of-light time 0.0102 us, under 10 us: small_problem",
        ),
        signals=("many_launches", "small_problem"),
        changes=(),
        next_steps=(
            NextStep(
                "Fuse the launches: 2 kernels per forward into one",
                "2 launches per forward for elementwise: each adds a gap of a few microseconds",
                ("launch-graphs", "fuse-kernels"),
                "up to 1 of 2 launch gaps saved per call",
                1,
                True,
            ),
            NextStep(
                "Cut fixed costs: the whole problem needs 0.0102 us at speed of light",
                "speed-of-light time 0.0102 us is under 10 us: launch overhead and idle SMs dominate",
                ("launch-graphs",),
                "fewer microseconds of overhead per call",
                2,
                True,
            ),
            NextStep(
                "Cut fixed per-call costs: 15 us per call for 0.0102 us of work",
                "latency_bound: 0.068% of the memory ceiling in a 15 us call",
                ("occupancy-tuning",),  # the latency skill no signal step took
                "fewer microseconds of launch and sync per call",
                3,
                True,
            ),
        ),
        lead="Bottleneck latency_bound at 0.068% of the memory ceiling (~1465x headroom)",
    )


# --- (d) under-utilised: neither ceiling approached in a long call ---------------------------------------


def test_under_utilised_reduction_with_memory_stalls() -> None:
    roof = _softmax_roofline(1.0)  # 0.1 ms of memory work in 1 ms: 10%
    kernel = KernelMetrics(
        name="sum_kernel",
        dram_throughput_pct=12.0,
        l2_hit_rate_pct=85.0,
        achieved_occupancy_pct=30.0,
        theoretical_occupancy_pct=50.0,
        registers_per_thread=64,
        top_stalls=(("long_scoreboard", 45.0), ("barrier", 10.0), ("math_pipe_throttle", 5.0)),
        duration_ms=1.0,
        launches=1,
    )
    diagnosis = diagnose(Snapshot(7, "correct", 1.0, 0.5, roof, (kernel,)), None, ("reduction",), skills=TOY)
    assert diagnosis == Diagnosis(
        bottleneck="under_utilised",
        headline="Bottleneck: under_utilised · Bandwidth: 10% of peak · L2 hit: 85% (good) · Occupancy: 0.30 · "
        "Headroom: ~10x",
        evidence=(
            *roof.evidence,
            "DRAM throughput 12% of peak, under 60% on a problem whose memory term sets the speed of light: "
            "low_dram_throughput",
            "L2 hit rate 85%",
            "achieved occupancy 30% of peak warps (theoretical 50%), under 40%: low_occupancy",
            "64 registers/thread",
            "memory stalls 45% of warp states (long_scoreboard 45%), over 30%: high_stall_memory",
            "barrier stalls 10% of warp states (barrier 10%)",
            "1 kernel launch per forward",
        ),
        signals=("low_dram_throughput", "low_occupancy", "high_stall_memory"),
        changes=(),
        next_steps=(
            NextStep(
                "Raise occupancy: 30% of peak warps resident",
                "achieved occupancy 30% is under 40% of peak warps (theoretical 50%)",
                ("occupancy-tuning",),
                "more warps in flight to hide latency",
                1,
                True,
            ),
            NextStep(
                "Stream memory faster: DRAM throughput 12% of peak",
                "DRAM throughput 12% is under 60% on a problem whose memory term sets the speed of light",
                ("stream-faster",),
                "closer to peak bandwidth",
                2,
                True,
            ),
            NextStep(
                "Hide memory latency: memory stalls are 45% of warp states",
                "memory stalls 45% are over 30%: warps wait on loads",
                ("in-flight-loads",),
                "more loads in flight per warp",
                3,
                True,
            ),
            NextStep(
                "Put more of the GPU to work: 10% of the memory ceiling, ~10x headroom",
                "under_utilised: 1 ms is long enough to reach a ceiling, yet it reaches 10% of the memory ceiling",
                ("persistent-grid",),
                "up to ~10x (the headroom)",
                4,
                True,
            ),
        ),
        lead="Bottleneck under_utilised at 10% of the memory ceiling (~10x headroom)",
    )


# --- (e) a failing kernel: no roofline talk, fix it first ------------------------------------------------

BEST = Snapshot(2, "correct", 0.134, 1.58, _softmax_roofline(0.134), (KernelMetrics(l2_hit_rate_pct=78.0),))


def test_incorrect_kernel_says_fix_correctness_first() -> None:
    reason = "trial 0: max abs error 0.5 at [3, 17] (tolerance 1e-05)"
    failing = Snapshot(4, "incorrect", None, None, None, (), "two rows per program", (reason,))
    diagnosis = diagnose(failing, BEST, ("softmax",), skills=TOY)
    assert diagnosis == Diagnosis(
        bottleneck=None,
        headline="Status: incorrect · not timed: fix it before optimising",
        evidence=(f"status incorrect: {reason}",),
        signals=(),
        changes=("status correct -> incorrect",),
        next_steps=(
            NextStep(
                "Fix correctness first: the output does not match the reference",
                f"status incorrect: {reason}",
                (),
                "a kernel that passes, so that it can be timed and profiled",
                1,
                False,
            ),
            NextStep(
                "Or start again from the best kernel: iteration 2 at 0.134 ms",
                "iteration 2 is correct at 0.134 ms (1.58x the reference)",
                (),
                "a known-good starting point",
                2,
                False,
            ),
        ),
        lead="Failed (incorrect)",
    )
    assert (
        diagnosis.summary()
        == "Failed (incorrect). Next: fix correctness first: the output does not match the reference."
    )


def test_compile_error_without_reasons_or_best() -> None:
    diagnosis = diagnose(Snapshot(1, "compile_error", None, None, None, ()), None, ("softmax",), skills=TOY)
    assert (diagnosis.evidence, diagnosis.next_steps) == (
        ("status compile_error: not timed or profiled",),
        (
            NextStep(
                "Fix the compile error first",
                "status compile_error",
                (),
                "a kernel that passes, so that it can be timed and profiled",
                1,
                False,
            ),
        ),
    )


# --- (f) no GPU: interpreter timing, analytic roofline only ----------------------------------------------


def test_cpu_run_has_no_bottleneck_and_generic_steps() -> None:
    roof = _softmax_roofline(None)
    snap = Snapshot(1, "correct", 12.5, 0.8, roof, (KernelMetrics(name="softmax_kernel", launches=1),))
    diagnosis = diagnose(snap, None, ("softmax",), backend="triton", skills=TOY)
    because = "not profile-driven: no GPU profile, and the memory term sets the speed of light (0.1 ms)"
    assert diagnosis == Diagnosis(
        bottleneck=None,
        headline="Bottleneck: — · Bandwidth: — · L2 hit: — · Occupancy: — · Headroom: —",
        evidence=(
            "runtime 12.5 ms is not a GPU timing of the target (the interpreter, or another GPU), so it says "
            "nothing about the bottleneck",
            roof.evidence[0],
            "1 kernel launch per forward",
        ),
        signals=(),
        changes=(),
        next_steps=(
            NextStep(
                "Title of stream-faster",
                f"{because} (matched bottleneck memory_bound, op class softmax)",
                ("stream-faster",),  # 5 + 2 for low_dram_throughput, a memory gap signal
                "effect of stream-faster",
                1,
                False,
            ),
            NextStep(
                "Title of in-flight-loads",
                f"{because} (matched bottleneck memory_bound, op class any)",
                ("in-flight-loads",),  # 4 + 2 for high_stall_memory
                "effect of in-flight-loads",
                2,
                False,
            ),
            NextStep(
                "Title of softmax-online",
                f"{because} (matched bottleneck memory_bound, op class softmax)",
                ("softmax-online",),
                "effect of softmax-online",
                3,
                False,
            ),
        ),
        lead="No GPU profile",
    )


def test_no_roofline_matmul_assumes_compute_and_keeps_static_signals() -> None:
    snap = Snapshot(
        1, "correct", None, None, None, (KernelMetrics(name="mm", registers_per_thread=200, spill_bytes=0),)
    )
    diagnosis = diagnose(snap, None, ("matmul",), skills=TOY)
    assert (
        diagnosis.evidence,
        diagnosis.signals,
        [(s.title, s.skill_ids, s.profile_driven) for s in diagnosis.next_steps],
    ) == (
        (
            "no GPU timing, so the bottleneck cannot be told",
            "no roofline: the problem's work was not counted, or the GPU is not in the hardware table",
            "200 registers/thread, over 128: high_registers",
            "0 bytes of register spills to local memory",
        ),
        ("high_registers",),
        [
            ("Cut register pressure: 200 registers/thread", ("occupancy-tuning",), True),
            ("Title of tensor-cores", ("tensor-cores",), False),  # compute_bound is the matmul prior
            ("Title of matmul-tiling", ("matmul-tiling",), False),
            ("Title of cache-hints", ("cache-hints",), False),
        ],
    )


# --- (g) what changed since the previous best -------------------------------------------------------------


def test_changes_since_best_lead_the_summary() -> None:
    best = Snapshot(
        2,
        "correct",
        0.212,
        1.0,
        _softmax_roofline(0.212),
        (KernelMetrics(l2_hit_rate_pct=45.0, registers_per_thread=96),),
    )
    now = Snapshot(
        3,
        "correct",
        0.134,
        1.58,
        _softmax_roofline(0.134),
        (KernelMetrics(l2_hit_rate_pct=78.0, registers_per_thread=168, achieved_occupancy_pct=25.0),),
    )
    diagnosis = diagnose(now, best, ("softmax",), backend="triton", skills=TOY)
    assert diagnosis.changes == (
        "runtime 0.212 -> 0.134 ms (1.58x)",
        "bottleneck under_utilised -> memory_bound",
        "L2 hit rate 45% -> 78%",
        "DRAM throughput 47% -> 75% of peak",
        "registers 96 -> 168/thread",
    )
    assert [s.title for s in diagnosis.next_steps] == [
        "Close the bandwidth gap: 75% of peak bandwidth, ~1.3x headroom",
        "Raise occupancy: 168 registers/thread limit it to 25%",
    ]
    assert diagnosis.summary() == (
        "L2 hit rate improved to 78%. Next: close the bandwidth gap: 75% of peak bandwidth, ~1.3x headroom."
    )


def test_runtime_leads_when_no_metric_improved() -> None:
    best = Snapshot(2, "correct", 0.134, 1.58, None, ())
    slower = Snapshot(3, "correct", 0.150, 1.41, None, ())
    diagnosis = diagnose(slower, best, ("softmax",), skills=TOY)
    assert (diagnosis.changes, diagnosis.lead) == (
        ("runtime 0.134 -> 0.15 ms (0.89x)",),
        "Runtime regressed to 0.15 ms (0.89x)",
    )


def test_best_that_is_current_reports_no_changes() -> None:
    assert diagnose(BEST, BEST, ("softmax",), skills=TOY).changes == ()


# --- (h) aten ops to op classes ----------------------------------------------------------------------------


def test_op_classes_of_reference_ops() -> None:
    ops = [
        "aten._softmax",
        "aten.mm",
        "aten.addmm",
        "aten.convolution",
        "aten._scaled_dot_product_flash_attention",
        "aten.native_layer_norm",
        "aten.sum",
        "aten.amax",
        "aten.gelu",
        "aten.add",
    ]
    assert [op_classes_of([op]) for op in ops] == [
        ("softmax",),
        ("matmul",),
        ("matmul",),
        ("conv",),
        ("attention",),
        ("norm",),
        ("reduction",),
        ("reduction",),
        ("elementwise",),
        ("elementwise",),
    ]
    assert op_classes_of(ops) == ("elementwise", "reduction", "softmax", "norm", "matmul", "conv", "attention")


def test_op_classes_of_drops_overloads_in_place_and_movement() -> None:
    ops = ("aten.relu_.default", "aten.addmm.default", "aten.view", "aten._to_copy", "aten.mystery_op")
    assert op_classes_of(ops) == ("elementwise", "matmul")
    assert op_classes_of(()) == ()


# --- the seam and its double --------------------------------------------------------------------------------


def test_scripted_critic_returns_in_order_and_records_calls() -> None:
    first = diagnose(BEST, None, ("softmax",), skills=TOY)
    second = diagnose(Snapshot(4, "timeout", None, None, None, ()), BEST, ("softmax",), skills=TOY)
    critic: Critic = ScriptedCritic([first, second])
    assert critic.critique(BEST, None, ("softmax",)) == first
    assert critic.critique(BEST, BEST, ("softmax",), "sm_90", "triton") == second
    assert isinstance(critic, ScriptedCritic)
    assert critic.calls == [(BEST, None, ("softmax",), None, None), (BEST, BEST, ("softmax",), "sm_90", "triton")]
    with pytest.raises(IndexError, match="ran out"):
        critic.critique(BEST, None, ("softmax",))


def test_rule_critic_uses_the_packaged_library() -> None:
    snap = Snapshot(
        3, "correct", 0.1 / 0.72, 1.5, _softmax_roofline(0.1 / 0.72), (KernelMetrics(l2_hit_rate_pct=45.0, launches=1),)
    )
    diagnosis = RuleCritic().critique(snap, None, ("softmax",), "sm_90", "triton")
    assert diagnosis == diagnose(snap, None, ("softmax",), "sm_90", "triton")
    library = {s.id for s in load_skills()}
    assert [s.title for s in diagnosis.next_steps] == [
        "Close the bandwidth gap: 72% of peak bandwidth, ~1.4x headroom",
        "Raise the L2 hit rate: 45% of requests hit",
    ]
    assert all(s.skill_ids and set(s.skill_ids) <= library for s in diagnosis.next_steps)


# --- from an evaluation result -------------------------------------------------------------------------------


def test_snapshot_of_eval_result() -> None:
    roof = _softmax_roofline(None)
    result = EvalResult(
        status=EvalStatus.CORRECT,
        reasons=("all checks passed",),
        problem="softmax_fp32",
        candidate="cand.py",
        backend="triton",
        device="cpu (Triton interpreter)",
        size="small",
        timing_valid=False,
        timing_note="no GPU",
        runtime_ms=12.5,
        reference_runtime_ms=10.0,
        speedup=0.8,
        compile_baseline_runtime_ms=None,
        candidate_timing=None,
        reference_timing=None,
        trials=(*(TrialCheck(i, True, None, 0.0, 0.0, 0) for i in range(3)), TrialCheck(-1, True, None, 0.0, 0.0, 0)),
        kernels_launched=(KernelLaunchCount("softmax_kernel", 6),),
        candidate_aten_ops=("aten.empty_like",),
        target_compiles=(
            TargetCompile("softmax_kernel", "cuda:90", True, None, 40, 0, 1024),
            TargetCompile("softmax_kernel", "cuda:90", True, None, 56, 0, 2048),
            TargetCompile("helper_kernel", "cuda:90", True, None, 32, None, 0),
        ),
        profile=roof,
        warnings=(),
        wall_seconds=1.0,
        log_tail="",
    )
    assert snapshot_of(result, 4, "one row per program") == Snapshot(
        iteration=4,
        status="correct",
        runtime_ms=12.5,
        speedup=0.8,
        roofline=roof,
        kernels=(
            KernelMetrics(
                name="softmax_kernel", registers_per_thread=56, shared_bytes_per_block=2048, spill_bytes=0, launches=2
            ),
            KernelMetrics(name="helper_kernel", registers_per_thread=32, shared_bytes_per_block=0),
        ),
        intent="one row per program",
        reasons=("all checks passed",),
    )
    given = (KernelMetrics(name="ncu", l2_hit_rate_pct=50.0),)
    assert snapshot_of(result, 4, kernels=given).kernels == given


def test_diagnosis_to_json_round_trips_its_fields() -> None:
    diagnosis = diagnose(Snapshot(1, "compile_error", None, None, None, ()), None, (), skills=TOY)
    assert diagnosis.to_json() == {
        "bottleneck": None,
        "headline": "Status: compile_error · not timed: fix it before optimising",
        "evidence": ["status compile_error: not timed or profiled"],
        "signals": [],
        "changes": [],
        "next_steps": [
            {
                "title": "Fix the compile error first",
                "why": "status compile_error",
                "skill_ids": [],
                "expected_effect": "a kernel that passes, so that it can be timed and profiled",
                "rank": 1,
                "profile_driven": False,
            }
        ],
        "lead": "Failed (compile_error)",
        "critic": "rules",
        "note": None,
    }
    assert Diagnosis.from_json(diagnosis.to_json()) == diagnosis
