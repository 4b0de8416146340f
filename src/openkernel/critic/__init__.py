"""The critic: from a kernel's profile and the run's history, a structured diagnosis of what to do next.

The seam is :class:`Critic` (one method, ``critique``). :class:`RuleCritic` is the rule-based one that
is always available (``diagnose``: stated thresholds, no model calls); :class:`ScriptedCritic` is the
test double that returns diagnoses it was given. The thresholds behind every signal are the constants
exported here, each with its unit.
"""

from __future__ import annotations

from collections.abc import Iterable

from openkernel.critic.facts import (
    BARRIER_STALLS,
    FUSIBLE_OP_CLASSES,
    HIGH_REGISTERS_PER_THREAD,
    HIGH_STALL_PCT,
    L2_HIT_GOOD_PCT,
    L2_HIT_POOR_PCT,
    LOW_DRAM_THROUGHPUT_PCT,
    LOW_OCCUPANCY_PCT,
    LOW_TENSOR_PIPE_PCT,
    MANY_LAUNCHES_PER_FORWARD,
    MAX_FUSED_LAUNCHES_PER_FORWARD,
    MEMORY_STALLS,
    SMALL_PROBLEM_SOL_MS,
    SPILL_BYTES_LIMIT,
    TENSOR_OP_CLASSES,
)
from openkernel.critic.model import Diagnosis, KernelMetrics, NextStep, Snapshot, op_classes_of, snapshot_of
from openkernel.critic.rules import diagnose
from openkernel.critic.steps import GENERIC_STEPS, MAX_STEPS, SKILLS_PER_STEP

__all__ = [
    "BARRIER_STALLS",
    "FUSIBLE_OP_CLASSES",
    "GENERIC_STEPS",
    "HIGH_REGISTERS_PER_THREAD",
    "HIGH_STALL_PCT",
    "L2_HIT_GOOD_PCT",
    "L2_HIT_POOR_PCT",
    "LOW_DRAM_THROUGHPUT_PCT",
    "LOW_OCCUPANCY_PCT",
    "LOW_TENSOR_PIPE_PCT",
    "MANY_LAUNCHES_PER_FORWARD",
    "MAX_FUSED_LAUNCHES_PER_FORWARD",
    "MAX_STEPS",
    "MEMORY_STALLS",
    "SKILLS_PER_STEP",
    "SMALL_PROBLEM_SOL_MS",
    "SPILL_BYTES_LIMIT",
    "TENSOR_OP_CLASSES",
    "Critic",
    "Diagnosis",
    "KernelMetrics",
    "NextStep",
    "RuleCritic",
    "ScriptedCritic",
    "Snapshot",
    "diagnose",
    "op_classes_of",
    "snapshot_of",
]


class Critic:
    """Turns (current kernel, previous best, op classes) into a :class:`Diagnosis`."""

    def critique(
        self,
        current: Snapshot,
        best: Snapshot | None,
        op_classes: tuple[str, ...],
        hardware: str | None = None,
        backend: str | None = None,
    ) -> Diagnosis:
        raise NotImplementedError


class RuleCritic(Critic):
    """The rule-based critic: :func:`diagnose` over the packaged skill library."""

    def critique(
        self,
        current: Snapshot,
        best: Snapshot | None,
        op_classes: tuple[str, ...],
        hardware: str | None = None,
        backend: str | None = None,
    ) -> Diagnosis:
        return diagnose(current, best, op_classes, hardware, backend)


class ScriptedCritic(Critic):
    """Returns the given diagnoses in order; records every call as (current, best, op_classes, hardware, backend)."""

    def __init__(self, diagnoses: Iterable[Diagnosis] = ()) -> None:
        self._diagnoses = list(diagnoses)
        self.calls: list[tuple[Snapshot, Snapshot | None, tuple[str, ...], str | None, str | None]] = []

    def critique(
        self,
        current: Snapshot,
        best: Snapshot | None,
        op_classes: tuple[str, ...],
        hardware: str | None = None,
        backend: str | None = None,
    ) -> Diagnosis:
        self.calls.append((current, best, op_classes, hardware, backend))
        if not self._diagnoses:
            raise IndexError("ScriptedCritic ran out of scripted diagnoses")
        return self._diagnoses.pop(0)
