"""What a body of traces holds: sessions, iterations, keep rate, and speedups by hardware, backend and model.

Iterations are grouped by the session's GPU and model and by the iteration's own backend (a session
can switch); a session counts in every group it has an iteration in. Speedups are those of correct
iterations (a wrong kernel's time means nothing); "best" is each session's final (best kept) speedup.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

__all__ = ["Distribution", "GroupStats", "TraceStats", "distribution", "trace_stats"]


@dataclass(frozen=True)
class Distribution:
    """A sample of speedups: its size and quartiles (inclusive method: p25 and p75 lie within the data)."""

    count: int
    min: float
    p25: float
    median: float
    p75: float
    max: float


@dataclass(frozen=True)
class GroupStats:
    hardware: str
    backend: str
    model: str
    sessions: int
    iterations: int
    kept: int
    keep_rate: float | None  # kept / iterations; None without iterations
    correct: int
    speedup: Distribution | None  # of the correct iterations; None: none was correct and timed
    best_speedup: Distribution | None  # of the sessions' final speedups; None: no session kept a kernel


@dataclass(frozen=True)
class TraceStats:
    sessions: int
    iterations: int
    kept: int
    keep_rate: float | None
    groups: tuple[GroupStats, ...]  # sorted by hardware, backend, model


def distribution(values: Sequence[float]) -> Distribution | None:
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        p25 = p75 = ordered[0]
    else:
        p25, _, p75 = statistics.quantiles(ordered, n=4, method="inclusive")
    return Distribution(len(ordered), ordered[0], p25, statistics.median(ordered), p75, ordered[-1])


@dataclass
class _Group:
    sessions: set[str] = field(default_factory=set)
    iterations: int = 0
    kept: int = 0
    correct: int = 0
    speedups: list[float] = field(default_factory=list)
    finals: dict[str, float] = field(default_factory=dict)  # session id -> its final speedup


def trace_stats(table: pa.Table) -> TraceStats:
    """The numbers ``kernel-code traces stats`` prints, for a table of the trace schema."""
    columns = ["session_id", "hardware", "backend", "model", "final_speedup", "iterations"]
    rows: list[dict[str, Any]] = table.select(columns).to_pylist()
    groups: dict[tuple[str, str, str], _Group] = defaultdict(_Group)
    for row in rows:
        sid, hardware, model = row["session_id"], row["hardware"], row["model"]
        iterations = row["iterations"] or []
        keys = {(hardware, it["backend"] or row["backend"], model) for it in iterations}
        for key in keys or {(hardware, row["backend"], model)}:
            groups[key].sessions.add(sid)
            if row["final_speedup"] is not None:
                groups[key].finals[sid] = row["final_speedup"]
        for it in iterations:
            g = groups[(hardware, it["backend"] or row["backend"], model)]
            g.iterations += 1
            g.kept += it["decision"] == "keep"
            result = it["eval_result"]
            if result is not None and result["correctness"]:
                g.correct += 1
                if result["speedup"] is not None:
                    g.speedups.append(result["speedup"])
    out = tuple(_group_stats(key, g) for key, g in sorted(groups.items()))
    iterations = sum(g.iterations for g in out)
    kept = sum(g.kept for g in out)
    return TraceStats(len(rows), iterations, kept, kept / iterations if iterations else None, out)


def _group_stats(key: tuple[str, str, str], g: _Group) -> GroupStats:
    return GroupStats(
        hardware=key[0],
        backend=key[1],
        model=key[2],
        sessions=len(g.sessions),
        iterations=g.iterations,
        kept=g.kept,
        keep_rate=g.kept / g.iterations if g.iterations else None,
        correct=g.correct,
        speedup=distribution(g.speedups),
        best_speedup=distribution(list(g.finals.values())),
    )
