"""The critic's data: what it knows about a kernel (``Snapshot``, ``KernelMetrics``) and what it says (``Diagnosis``).

Kept apart from the rules so that the store, the prompts and the views can read a diagnosis without
pulling in the rules, and so that the profiler that fills ``KernelMetrics`` from Nsight Compute has
one fixed shape to fill.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from openkernel.profile.roofline import Roofline
from openkernel.types import EvalResult, TargetCompile

__all__ = ["Diagnosis", "KernelMetrics", "NextStep", "Snapshot", "op_classes_of", "snapshot_of"]


@dataclass(frozen=True)
class KernelMetrics:
    """One kernel's numbers from a deep profile (Nsight Compute); ``None`` where not profiled.

    Percentages are 0-100. Without a GPU only ``name``, ``launches`` and the static compile figures
    (registers, shared memory, spills of a compile for the target) can be known.
    """

    name: str | None = None
    dram_throughput_pct: float | None = None  # of peak DRAM bandwidth
    l2_hit_rate_pct: float | None = None
    l1_hit_rate_pct: float | None = None
    achieved_occupancy_pct: float | None = None  # resident warps, of the SM's peak warps
    theoretical_occupancy_pct: float | None = None  # what registers, shared memory and block size allow
    sm_throughput_pct: float | None = None  # of peak SM (compute) throughput
    tensor_pipe_active_pct: float | None = None  # of cycles the tensor-core pipe is busy
    registers_per_thread: int | None = None
    shared_bytes_per_block: int | None = None
    spill_bytes: int | None = None  # register spills to local memory
    duration_ms: float | None = None  # one launch
    top_stalls: tuple[tuple[str, float], ...] = ()  # (ncu stall reason, percent of warp states), largest first
    launches: int | None = None  # launches of this kernel per forward call


@dataclass(frozen=True)
class Snapshot:
    """What the critic knows about one evaluated kernel (see ``snapshot_of`` for an ``EvalResult``)."""

    iteration: int
    status: str  # an EvalStatus value: "correct", "incorrect", ...
    runtime_ms: float | None  # None when not timed
    speedup: float | None  # reference / candidate
    roofline: Roofline | None  # the problem on the target GPU, with this kernel's time when it was a GPU timing
    kernels: tuple[KernelMetrics, ...] = ()
    intent: str | None = None  # what the candidate set out to try, in the generator's words
    reasons: tuple[str, ...] = ()  # the evaluator's reasons, most important first (why it failed)


@dataclass(frozen=True)
class NextStep:
    """One thing to try next, with the measurement that motivates it and the skills that teach it."""

    title: str  # imperative and specific: "Raise occupancy: 168 registers/thread limit it to 25%"
    why: str  # names the metric and its value
    skill_ids: tuple[str, ...]  # skills from the library whose match reasons fit this step
    expected_effect: str
    rank: int  # 1 is the largest expected gain
    profile_driven: bool  # False: a generic suggestion for the op class, no measurement behind it


@dataclass(frozen=True)
class Diagnosis:
    """The critic's verdict on one kernel: what bounds it, the numbers that say so, and what to try."""

    bottleneck: str | None  # "memory_bound", "compute_bound", "latency_bound", "under_utilised"; None: unknown
    headline: str  # "Bottleneck: memory_bound · Bandwidth: 72% of peak · L2 hit: 45% (poor) · ..."
    evidence: tuple[str, ...]  # each sentence names a metric and its value
    signals: tuple[str, ...]  # from the skills' SIGNALS vocabulary, by the thresholds in openkernel.critic
    changes: tuple[str, ...]  # since the previous best: "runtime 0.212 -> 0.134 ms (1.58x)"; empty without one
    next_steps: tuple[NextStep, ...]  # best first
    lead: str  # the first sentence of the summary: the change that matters most, or the state of the kernel
    critic: str = "rules"  # who wrote the lead and next steps: "rules", or the LLM critic's "openai:gpt-4o"
    note: str | None = None  # why the LLM critic was asked but its answer not used; None: nothing to say

    def summary(self) -> str:
        """One or two sentences: "L2 hit rate improved to 78%. Next: raise occupancy: ..."."""
        if not self.next_steps:
            return f"{self.lead}."
        title = self.next_steps[0].title
        if title[1:2].islower():  # "Raise" reads as "raise" mid-sentence; "L2 ..." keeps its capital
            title = title[0].lower() + title[1:]
        return f"{self.lead}. Next: {title}."

    def to_json(self) -> dict[str, Any]:
        return {
            "bottleneck": self.bottleneck,
            "headline": self.headline,
            "evidence": list(self.evidence),
            "signals": list(self.signals),
            "changes": list(self.changes),
            "next_steps": [{**dataclasses.asdict(s), "skill_ids": list(s.skill_ids)} for s in self.next_steps],
            "lead": self.lead,
            "critic": self.critic,
            "note": self.note,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Diagnosis:
        """The diagnosis ``to_json`` wrote; one written before ``critic`` and ``note`` existed reads as the rules'."""
        steps = tuple(NextStep(**{**s, "skill_ids": tuple(s["skill_ids"])}) for s in data["next_steps"])
        return cls(
            bottleneck=data["bottleneck"],
            headline=data["headline"],
            evidence=tuple(data["evidence"]),
            signals=tuple(data["signals"]),
            changes=tuple(data["changes"]),
            next_steps=steps,
            lead=data["lead"],
            critic=data.get("critic", "rules"),
            note=data.get("note"),
        )


# The skills' op classes for the aten ops a reference runs (names as torch prints them, "aten._softmax";
# an overload such as ".default" and an in-place "_" are dropped). Views, copies and allocations have no
# class: they move data for the others.
_OP_CLASS_OF: dict[str, str] = {
    name: op_class
    for op_class, names in (
        ("softmax", "_softmax _log_softmax _safe_softmax softmax log_softmax"),
        (
            "matmul",
            "mm addmm bmm baddbmm addbmm matmul linear mv addmv dot vdot _scaled_mm _int_mm einsum bilinear",
        ),
        (
            "conv",
            "convolution _convolution convolution_overrideable conv1d conv2d conv3d conv_transpose1d "
            "conv_transpose2d conv_transpose3d _slow_conv2d_forward cudnn_convolution mkldnn_convolution",
        ),
        (
            "attention",
            "scaled_dot_product_attention _scaled_dot_product_flash_attention _scaled_dot_product_efficient_attention "
            "_scaled_dot_product_cudnn_attention _scaled_dot_product_attention_math "
            "_scaled_dot_product_flash_attention_for_cpu _flash_attention_forward _efficient_attention_forward",
        ),
        (
            "norm",
            "native_layer_norm layer_norm native_group_norm group_norm native_batch_norm batch_norm "
            "_native_batch_norm_legit _native_batch_norm_legit_no_training _native_batch_norm_legit_functional "
            "instance_norm _fused_rms_norm rms_norm",
        ),
        (
            "reduction",
            "sum mean amax amin max min aminmax prod norm linalg_vector_norm var std var_mean std_mean logsumexp "
            "argmax argmin cumsum cumprod any all nansum nanmean count_nonzero",
        ),
        (
            "elementwise",
            "add sub rsub mul div neg abs reciprocal sqrt rsqrt square pow relu relu6 clamp clamp_min clamp_max "
            "maximum minimum where threshold hardtanh leaky_relu sign floor ceil round trunc remainder fmod lerp "
            "addcmul addcdiv eq ne lt le gt ge logical_and logical_or logical_not masked_fill hardsigmoid "
            "hardswish _prelu_kernel exp exp2 expm1 log log2 log10 log1p tanh sigmoid erf erfc sin cos gelu silu "
            "mish softplus elu selu celu logit",
        ),
    )
    for name in names.split()
}
# The order classes are reported in: the skills' vocabulary order.
_CLASS_ORDER = ("elementwise", "reduction", "softmax", "norm", "matmul", "conv", "attention")


def op_classes_of(aten_ops: Iterable[str]) -> tuple[str, ...]:
    """The skills' op classes of ``aten_ops`` ("aten.addmm", "aten.gelu" -> ("elementwise", "matmul")).

    Each op maps to one class: softmax, matmul (mm, addmm, bmm, linear, ...), conv (convolution and
    its variants), attention (the scaled-dot-product kernels), norm (layer, group, batch, RMS), reduction
    (sum, mean, amax, var, ...), elementwise (arithmetic, comparisons, activations, transcendentals).
    Unknown and data-movement ops are left out. The result follows the vocabulary's order, each class once.
    """
    found: set[str] = set()
    for op in aten_ops:
        name = op.removeprefix("aten.").split(".")[0]
        if name.endswith("_") and not name.endswith("__"):
            name = name[:-1]
        if name in _OP_CLASS_OF:
            found.add(_OP_CLASS_OF[name])
    return tuple(c for c in _CLASS_ORDER if c in found)


def snapshot_of(
    result: EvalResult,
    iteration: int,
    intent: str | None = None,
    kernels: tuple[KernelMetrics, ...] | None = None,
) -> Snapshot:
    """The critic's view of an evaluation. ``kernels`` None: what the result itself knows of its kernels.

    That is each launched kernel with its launches per forward (the evaluator counts launches over
    its correctness trials, one forward each) and, for a compile check without a GPU, the largest
    registers, spills and shared memory of any specialisation compiled for the target. Pass a deep
    profile's ``KernelMetrics`` to replace it.
    """
    if kernels is None:
        forwards = sum(1 for t in result.trials if t.trial >= 0)
        compiles: dict[str, list[TargetCompile]] = {}
        for c in result.target_compiles:
            if c.ok:
                compiles.setdefault(c.kernel, []).append(c)
        counts = {k.name: k.launches for k in result.kernels_launched}
        names = [*counts, *(n for n in compiles if n not in counts)]
        kernels = tuple(
            KernelMetrics(
                name=name,
                registers_per_thread=_most(c.registers_per_thread for c in compiles.get(name, [])),
                shared_bytes_per_block=_most(c.shared_bytes for c in compiles.get(name, [])),
                spill_bytes=_most(c.spill_store_bytes for c in compiles.get(name, [])),
                launches=round(counts[name] / forwards) if name in counts and forwards else None,
            )
            for name in names
        )
    return Snapshot(
        iteration=iteration,
        status=str(result.status),
        runtime_ms=result.runtime_ms,
        speedup=result.speedup,
        roofline=result.profile,
        kernels=kernels,
        intent=intent,
        reasons=result.reasons,
    )


def _most(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None
