"""Recorded sessions for the traces tests: the real loop writing a real session directory, with a
scripted generator, evaluator and critic (so a session takes milliseconds and every value is known)."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from pathlib import Path

import torch

from openkernel.critic import Diagnosis, NextStep, ScriptedCritic
from openkernel.evaluate import ScriptedEvaluator
from openkernel.events import Event, SessionConfig
from openkernel.generate.base import Proposal, ScriptedGenerator, Usage
from openkernel.hardware import Ceilings, ComputeCeiling
from openkernel.loop import LoopOptions, optimize
from openkernel.problems import load_problem
from openkernel.profile import FlopCount, FlopRule, analyse
from openkernel.profile.flops import RULE_SOFTMAX
from openkernel.store import DirectoryStore
from openkernel.types import EvalResult, EvalStatus, TimingStats

PROBLEM = load_problem("softmax_fp32")
REFERENCE_MS = 2.0  # the reference's runtime in every scripted result
FLOPS, MIN_BYTES = 5_000_000, 8_000_000  # the softmax's work, for the profile
CEILINGS = Ceilings(
    gpu="NVIDIA H200",
    bandwidth_bytes_per_s=4e12,
    bandwidth_source="datasheet",
    compute=(ComputeCeiling("fp32", 50e12, "datasheet"),),
)


@dataclass(frozen=True)
class Step:
    """One scripted iteration: what the generator proposes, and (when it has a kernel) its verdict."""

    source: str | None  # None: the reply had no kernel
    intent: str
    runtime_ms: float | None = None  # None with a source: the kernel was wrong
    tokens: tuple[int, int] | None = (1000, 400)  # prompt, completion
    prompt: str | None = None  # None: "prompt for <intent>"
    reply: str | None = None  # None: "reply for <intent>"


def result(runtime_ms: float | None) -> EvalResult:
    """A correct result timed at ``runtime_ms`` (with its roofline), or an incorrect one for None."""
    correct = runtime_ms is not None
    count = FlopCount(FLOPS, (FlopRule(RULE_SOFTMAX, "aten._softmax", FLOPS),), "float32")
    timing = TimingStats("cuda_events", 50, runtime_ms, runtime_ms, runtime_ms, runtime_ms, runtime_ms,
                         runtime_ms, 0.0, None, None) if runtime_ms is not None else None  # fmt: skip
    return EvalResult(
        status=EvalStatus.CORRECT if correct else EvalStatus.INCORRECT,
        reasons=("all checks passed",) if correct else ("output differs at 3 of 4096 elements",),
        problem="softmax_fp32",
        candidate="c.py",
        backend="triton",
        device="cuda:0 (NVIDIA H200)",
        size="full",
        timing_valid=correct,
        timing_note=None,
        runtime_ms=runtime_ms,
        reference_runtime_ms=REFERENCE_MS,
        speedup=REFERENCE_MS / runtime_ms if runtime_ms is not None else None,
        compile_baseline_runtime_ms=None,
        candidate_timing=timing,
        reference_timing=None,
        trials=(),
        kernels_launched=(),
        candidate_aten_ops=(),
        target_compiles=(),
        profile=analyse(count, MIN_BYTES, torch.float32, CEILINGS, runtime_ms),
        warnings=(),
        wall_seconds=3.5,
        log_tail="",
    )


def diagnosis(iteration: int) -> Diagnosis:
    return Diagnosis(
        bottleneck="memory_bound",
        headline=f"Bottleneck: memory_bound (iteration {iteration})",
        evidence=("72% of peak bandwidth",),
        signals=("low_l2_hit",),
        changes=(),
        next_steps=(NextStep("Fuse the passes", "two reads of x", ("fusion",), "1.5x", 1, True),),
        lead="The kernel reads its input twice",
    )


def proposal(step: Step) -> Proposal:
    usage = Usage(step.tokens[0], step.tokens[1], 0.01) if step.tokens is not None else None
    return Proposal(
        source=step.source,
        intent=step.intent,
        text=step.reply if step.reply is not None else f"reply for {step.intent}",
        usage=usage,
        error=None if step.source is not None else "the reply had no code block",
        prompt=step.prompt if step.prompt is not None else f"prompt for {step.intent}",
    )


def record(
    path: Path,
    steps: list[Step],
    started_at_unix_s: float = 1_795_000_000.0,
    model: str = "openai:gpt-test",
    hardware: str = "NVIDIA H200",
    hints: tuple[str, ...] = (),
) -> list[Event]:
    """Run the loop over ``steps`` into a new session directory at ``path``; every event is 1 s after the last."""
    config = SessionConfig("triton", model, "full", len(steps), None, None, None)
    store = DirectoryStore.create_at(path, PROBLEM.name, config)
    clock = itertools.count(started_at_unix_s)
    evaluated = [s for s in steps if s.source is not None]
    options = LoopOptions(
        clock=lambda: 0.0,
        wall_clock=lambda: float(next(clock)),
        device=f"cuda:0 ({hardware})",  # the session ran on that GPU, and drew its roofline for it
        hardware_label=hardware,
        hints=hints,
        delta_flush_chars=10**9,  # one GeneratorDelta per reply
    )
    return list(
        optimize(
            PROBLEM,
            ScriptedGenerator([proposal(s) for s in steps]),
            ScriptedEvaluator([result(s.runtime_ms) for s in evaluated]),
            store,
            config,
            critic=ScriptedCritic([diagnosis(i) for i, s in enumerate(steps) if s.source is not None]),
            options=options,
        )
    )


# A session of four iterations: a kept kernel, a faster kept one, a wrong one, and a reply without code.
KERNEL_A = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass  # one row per program\n"
KERNEL_B = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass  # two rows per program\n"
KERNEL_C = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass  # online softmax, wrong\n"
STEPS = [
    Step(KERNEL_A, "one row per program", runtime_ms=1.0),
    Step(KERNEL_B, "two rows per program", runtime_ms=0.5),
    Step(KERNEL_C, "online softmax", runtime_ms=None),
    Step(None, "", tokens=(900, 10)),
]


def with_steps(steps: list[Step], **changes: object) -> list[Step]:
    return [dataclasses.replace(s, **changes) for s in steps]  # type: ignore[arg-type]
