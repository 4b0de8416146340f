"""A sweep's summary, from its record alone: each problem's status and best speedup, fast_p, geomean.

KernelBench's measures, over every problem of the sweep (``N`` of them):

- ``fast_p`` is the fraction of the ``N`` problems whose kernel is correct and more than ``p`` times
  as fast as the reference. A problem that failed, or found no correct kernel, counts in ``N`` and
  never above it. ``fast_0`` is the fraction with a correct kernel. For ``p > 0`` the speedups must be
  GPU timings: when a correct problem's speedup was not measured on a GPU (a CPU slot: correctness
  only), ``fast_p`` is ``None`` ("not timed") rather than a number that means nothing.
- the geometric mean speedup is taken over the problems with a correct kernel timed on a GPU; failed
  and incorrect problems are left out of it (fast_p carries them), and it is ``None`` when no problem
  has such a speedup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from openkernel.sweeps.outcome import SessionOutcome
from openkernel.sweeps.record import (
    AttemptFailed,
    AttemptFinished,
    AttemptSubmitted,
    SweepEntry,
    SweepFinished,
    SweepRecord,
    SweepStarted,
)

__all__ = [
    "FAST_P",
    "ProblemRow",
    "Status",
    "SweepSummary",
    "fast_p",
    "geomean_speedup",
    "measures_text",
    "rows_of",
    "speedup_text",
    "summarise",
]

FAST_P = (0.0, 1.0, 1.5, 2.0)  # the thresholds summarised (KernelBench reports fast_0, fast_1, fast_2)
Status = Literal["pending", "running", "retrying", "finished", "failed"]


@dataclass(frozen=True)
class ProblemRow:
    """One problem of a sweep, as its record says so far."""

    problem: str
    status: Status  # running: submitted, not ended (a stopped sweep's stay so until it is resumed)
    attempts: int  # attempts submitted so far
    session_dir: str | None  # the latest attempt's session
    reason: str  # why it finished, or why its latest attempt failed; "" before either
    outcome: SessionOutcome | None  # set once finished


@dataclass(frozen=True)
class SweepSummary:
    sweep_id: str
    path: Path  # the sweep's folder
    rows: tuple[ProblemRow, ...]  # in the order the problems were given
    fast_p: tuple[tuple[float, float | None], ...]  # (p, fraction), for each p in FAST_P
    geomean_speedup: float | None
    tokens: int  # over every attempt that finished (a killed attempt's spend is in its partial session only)
    cost_usd: float  # over the finished attempts whose price is known
    cost_unknown: int  # finished attempts whose model's price is unknown (not in cost_usd)
    complete: bool  # the record ends with the sweep's end


def fast_p(outcomes: Sequence[SessionOutcome | None], p: float) -> float | None:
    """The fraction of problems (``None``: failed, no session outcome) correct and faster than ``p``x."""
    if not outcomes:
        return None
    correct = [o for o in outcomes if o is not None and o.correct]
    if p == 0:
        return len(correct) / len(outcomes)
    if any(not o.timing_valid or o.best_speedup is None for o in correct):
        return None
    return fast_p_of([o.best_speedup if o is not None and o.correct else None for o in outcomes], p)


def fast_p_of(speedups: Sequence[float | None], p: float) -> float | None:
    """KernelBench's fast_p over plain speedups, one per problem: the share that are more than ``p``x
    (``None``: no correct kernel, counted in the denominator and never fast)."""
    if not speedups:
        return None
    return sum(1 for s in speedups if s is not None and s > p) / len(speedups)


def geomean_speedup(outcomes: Sequence[SessionOutcome | None]) -> float | None:
    """The geometric mean of the GPU-timed speedups of the correct problems (see the module docstring)."""
    return geometric_mean(
        [
            o.best_speedup
            for o in outcomes
            if o is not None and o.correct and o.timing_valid and o.best_speedup is not None
        ]
    )


def geometric_mean(values: Sequence[float | None]) -> float | None:
    """The geometric mean of the positive values (``None`` and the rest left out); None when there are none."""
    positive = [v for v in values if v is not None and v > 0]
    if not positive:
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def rows_of(entries: Sequence[SweepEntry]) -> tuple[ProblemRow, ...]:
    """Each problem's row, folding the record's entries in order."""
    started = next((e for e in entries if isinstance(e, SweepStarted)), None)
    if started is None:
        return ()
    rows = {p.name: ProblemRow(p.name, "pending", 0, None, "", None) for p in started.problems}
    for e in entries:
        if isinstance(e, AttemptSubmitted) and e.problem in rows:
            attempts = max(rows[e.problem].attempts, e.attempt)
            rows[e.problem] = ProblemRow(e.problem, "running", attempts, e.session_dir, "", None)
        elif isinstance(e, AttemptFinished) and e.problem in rows:
            row = rows[e.problem]
            rows[e.problem] = replace(row, status="finished", session_dir=e.session_dir, reason=e.outcome.reason,
                                      outcome=e.outcome)  # fmt: skip
        elif isinstance(e, AttemptFailed) and e.problem in rows:
            status: Status = "retrying" if e.retried else "failed"
            rows[e.problem] = replace(rows[e.problem], status=status, session_dir=e.session_dir,
                                      reason=f"{e.cause}: {e.reason}", outcome=None)  # fmt: skip
    return tuple(rows.values())


def summarise(record_dir: Path) -> SweepSummary:
    """The summary of the sweep recorded in ``record_dir`` (also while it runs)."""
    record = SweepRecord.open(record_dir)
    entries = record.read()
    rows = rows_of(entries)
    outcomes = [r.outcome for r in rows]
    finished = [e.outcome for e in entries if isinstance(e, AttemptFinished)]
    return SweepSummary(
        sweep_id=record.sweep_id,
        path=record_dir,
        rows=rows,
        fast_p=tuple((p, fast_p(outcomes, p)) for p in FAST_P),
        geomean_speedup=geomean_speedup(outcomes),
        tokens=sum(o.tokens for o in finished),
        cost_usd=sum(o.cost_usd for o in finished if o.cost_usd is not None),
        cost_unknown=sum(1 for o in finished if o.cost_usd is None),
        complete=bool(entries) and isinstance(entries[-1], SweepFinished),
    )


def speedup_text(outcome: SessionOutcome | None) -> str:
    """The best speedup as shown: "1.42x" on a GPU, "0.00015x cpu*" when not a GPU timing, "—" with none."""
    if outcome is None or outcome.best_speedup is None:
        return "—"
    speedup = outcome.best_speedup
    shown = f"{speedup:.2f}x" if speedup >= 0.01 else f"{speedup:.2g}x"
    return shown + ("" if outcome.timing_valid else " cpu*")


def measures_text(summary: SweepSummary) -> str:
    """fast_p at each p, the geometric mean, tokens and cost, on one line."""
    count = len(summary.rows)
    parts = [
        f"fast_{p:g} " + ("not timed" if value is None else f"{value:.2f} ({round(value * count)}/{count})")
        for p, value in summary.fast_p
    ]
    geomean = "not timed" if summary.geomean_speedup is None else f"{summary.geomean_speedup:.2f}x"
    unknown = f" + {summary.cost_unknown} at an unknown price" if summary.cost_unknown else ""
    return " · ".join([*parts, f"geomean {geomean}", f"{summary.tokens:,} tokens", f"${summary.cost_usd:.4f}{unknown}"])
