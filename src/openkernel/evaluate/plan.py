"""What one evaluation is about: the plan (seeds, sizes, schedule) and what the reference produced.

Plain data passed between the parent's stages; nothing here talks to a process.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from openkernel.errors import BadProblem
from openkernel.evaluate.config import EvalConfig
from openkernel.profile import WorkCount
from openkernel.types import EvalStatus, Problem

__all__ = ["Context", "Plan", "Reference", "Verdict", "make_plan", "resolve_device", "worker_env"]


class Verdict(Exception):
    """Raised inside the candidate phase to stop at the first decisive finding."""

    def __init__(self, status: EvalStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class Reference:
    device_label: str = ""
    expected: list[tuple[str, list[torch.Tensor]]] = field(default_factory=list)  # per trial
    checked: dict[int, tuple[str, list[torch.Tensor]]] = field(default_factory=dict)  # per checked timed call
    checked_received: bool = False  # the checked calls' outputs arrive after the candidate's timed calls
    aten_ops: list[str] = field(default_factory=list)
    timing: dict[str, Any] | None = None
    compile_timing: dict[str, Any] | None = None
    input_bytes: int = 0
    has_weights: bool = False
    atol: float | None = None
    rtol: float | None = None
    degenerate: list[str] = field(default_factory=list)  # trivial answers that pass (a weak problem)
    work: WorkCount | None = None  # FLOPs and minimal bytes of one forward, for the roofline
    work_error: str | None = None


@dataclass
class Plan:
    device: str
    size: str
    sizes: list[tuple[str, Any]]
    trials: list[dict[str, int]]
    warmup: int
    samples: int
    schedule: list[tuple[int, int]]
    checked: list[int]


@dataclass(frozen=True)
class Context:
    """What one evaluation is about, handed around as one value."""

    problem: Problem
    candidate: Path
    plan: Plan
    config: EvalConfig
    env: dict[str, str]
    started: float
    phase_seconds: dict[str, float] = field(default_factory=dict)  # the parent's phases, before the candidate's


def resolve_device(requested: str) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise BadProblem("--device cuda was asked for but this machine has no CUDA GPU: use --device cpu or auto")
    return requested


def make_plan(problem: Problem, config: EvalConfig) -> Plan:
    device = resolve_device(config.device)
    on_gpu = device.startswith("cuda")
    size = config.size if config.size != "auto" else ("full" if on_gpu or not problem.has_small_size else "small")
    if size == "small" and not problem.has_small_size:
        size = "full"
    rng = secrets.SystemRandom()
    trials = [
        {"input_seed": rng.randrange(1, 2**62), "weight_seed": rng.randrange(1, 2**62)} for _ in range(config.trials)
    ]
    warmup = config.warmup if config.warmup is not None else (5 if on_gpu else 1)
    samples = config.samples if config.samples is not None else (50 if on_gpu else 5)
    schedule = [(i % config.trials, rng.randrange(1, 2**62)) for i in range(warmup + samples)]
    timed = list(range(warmup, warmup + samples))
    checked = sorted(random.Random(rng.randrange(2**62)).sample(timed, min(config.checked_samples, len(timed))))
    return Plan(
        device=device,
        size=size,
        sizes=[*(problem.small_sizes if size == "small" else ()), *config.size_overrides],
        trials=trials,
        warmup=warmup,
        samples=samples,
        schedule=schedule,
        checked=checked,
    )


def worker_env(plan: Plan) -> dict[str, str]:
    env: dict[str, str] = {}
    if not plan.device.startswith("cuda"):
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env
