"""What a sweep keeps of one finished session: :class:`SessionOutcome`, read from the session's events.

A session task returns it to the driver, which writes it into the sweep record; a resumed sweep
reads it again from a session that finished while nobody was listening (the driver had stopped).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from openkernel.events import EvaluationFinished, Resumed, SessionFinished, SessionStarted, UsageUpdate
from openkernel.store import DirectoryStore

__all__ = ["SessionOutcome", "outcome_of"]


@dataclass(frozen=True)
class SessionOutcome:
    reason: str  # why the session finished: "iteration budget spent (3 of 3)", ...
    iterations: int  # completed iterations
    best_iteration: int | None  # None: no correct kernel was kept
    best_speedup: float | None  # the best kernel's speedup over the reference; None when not timed
    timing_valid: bool  # the best's speedup was measured on a GPU (False on the CPU: correctness only)
    tokens: int  # prompt + completion tokens the session spent
    cost_usd: float | None  # what they cost; None when the model's price is unknown
    device: str  # where it ran: "cuda:0 (NVIDIA H200)", "cpu (Triton interpreter)"

    @property
    def correct(self) -> bool:
        """A correct kernel was found (the loop keeps only correct kernels)."""
        return self.best_iteration is not None


def outcome_of(path: Path) -> SessionOutcome | None:
    """The outcome of the finished session at ``path``; None while it has not finished (or was resumed since)."""
    events = DirectoryStore.open(path).read_events().events
    finished: SessionFinished | None = None
    device = "unknown"
    tokens = 0
    cost: float | None = 0.0  # no usage at all (the offline generator): nothing was spent
    timing_valid: dict[int, bool] = {}
    for event in events:
        if isinstance(event, SessionStarted):
            device = event.device
        elif isinstance(event, SessionFinished | Resumed):
            finished = event if isinstance(event, SessionFinished) else None
        elif isinstance(event, UsageUpdate):
            tokens, cost = event.total_tokens, event.total_cost_usd
        elif isinstance(event, EvaluationFinished):
            timing_valid[event.iteration] = event.result_json.get("timing_valid") is True
    if finished is None:
        return None
    best = finished.best_iteration
    return SessionOutcome(
        reason=finished.reason,
        iterations=finished.iterations,
        best_iteration=best,
        best_speedup=finished.best_speedup,
        timing_valid=best is not None and timing_valid.get(best, False),
        tokens=tokens,
        cost_usd=cost,
        device=device,
    )
