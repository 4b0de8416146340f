"""What the loop carries from one iteration to the next, and how a resume rebuilds it from the events.

Only completed iterations (those with a ``Decision`` on disk) count: the events of an interrupted
iteration are left out, since that iteration is redone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openkernel.critic import Diagnosis, Snapshot
from openkernel.events import (
    Decision,
    DiagnosisMade,
    EvaluationFinished,
    Event,
    IterationStarted,
    KernelProposed,
    SessionStarted,
    UsageUpdate,
)
from openkernel.generate.base import PastResult
from openkernel.loop.decide import BestKernel, past_result
from openkernel.store import ResumePoint
from openkernel.types import TimingStats

__all__ = ["LoopState", "rebuild_state"]


@dataclass
class LoopState:
    backend: str  # the backend the next iteration proposes for
    next_iteration: int = 0
    completed: int = 0  # iterations decided, for the iteration budget
    best: BestKernel | None = None
    best_snapshot: Snapshot | None = None  # the critic's view of the best (without a roofline after a resume)
    history: list[PastResult] = field(default_factory=list)  # evaluated iterations, oldest first
    last_error: str | None = None  # the previous proposal's error when it had no kernel
    diagnosis: Diagnosis | None = None  # the critic on the last evaluated kernel
    op_classes: tuple[str, ...] = ()  # the problem's, once a profile has named them
    hints: tuple[str, ...] = ()  # hints waiting for the next iteration (besides the Controls')
    total_tokens: int = 0
    total_cost_usd: float | None = None  # None: no priced call yet
    elapsed_before_s: float = 0.0  # wall time spent by earlier processes of this session
    paused_s: float = 0.0  # time spent paused, not counted against the wall-time budget


def rebuild_state(events: Sequence[Event], point: ResumePoint, session_dir: Path, backend: str) -> LoopState:
    """The state after the completed iterations in ``events`` (a session directory's, read back)."""
    done = set(point.completed)
    state = LoopState(backend=backend, next_iteration=point.next_iteration, completed=len(done))
    intents: dict[int, str | None] = {}
    kernels: dict[int, str] = {}
    results: dict[int, dict[str, Any]] = {}
    for e in events:
        if isinstance(e, UsageUpdate):  # tokens spent on an interrupted iteration were spent all the same
            state.total_tokens, state.total_cost_usd = e.total_tokens, e.total_cost_usd
        if getattr(e, "iteration", None) not in done:
            continue
        if isinstance(e, IterationStarted):
            intents[e.iteration] = None
        elif isinstance(e, KernelProposed):
            intents[e.iteration], kernels[e.iteration] = e.intent, e.kernel_file
        elif isinstance(e, EvaluationFinished):
            results[e.iteration] = e.result_json
            state.backend = str(e.result_json.get("backend", state.backend))
            state.history.append(past_result(e.iteration, intents.get(e.iteration), e.result_json))
        elif isinstance(e, DiagnosisMade):
            state.diagnosis = Diagnosis.from_json(e.diagnosis_json)
        elif isinstance(e, Decision):
            state.last_error = e.reason if e.decision == "error" and e.iteration not in results else None
            if e.decision == "keep":
                r = results[e.iteration]
                state.best = BestKernel(
                    iteration=e.iteration,
                    source=(session_dir / kernels[e.iteration]).read_text(encoding="utf-8"),
                    speedup=e.speedup,
                    runtime_ms=_float(r.get("runtime_ms")),
                    timing=TimingStats(**r["candidate_timing"]) if r.get("candidate_timing") else None,
                )
                state.best_snapshot = Snapshot(
                    iteration=e.iteration,
                    status=str(r["status"]),
                    runtime_ms=_float(r.get("runtime_ms")),
                    speedup=e.speedup,
                    roofline=None,
                    intent=intents.get(e.iteration),
                    reasons=tuple(str(x) for x in r.get("reasons", [])),
                )
    starts = [e.at_unix_s for e in events if isinstance(e, SessionStarted)]
    if starts and events:
        state.elapsed_before_s = max(0.0, events[-1].at_unix_s - starts[0])
    return state


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None
