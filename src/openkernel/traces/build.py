"""A recorded session directory -> one OptimizationTrace row (see ``schema``), scrubbed of secrets.

Everything comes from what the session left on disk: the events (the source of truth), the kernel
files they name, and ``prompts/iter_NNNN.md`` where the generator had a prompt. So a session recorded
before trace capture was turned on exports the same as one captured live. Only decided iterations
are traced; of an iteration redone after a kill, the attempt that was decided.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openkernel.errors import StoreError
from openkernel.events import (
    Decision,
    DiagnosisMade,
    EvaluationFinished,
    GeneratorDelta,
    IterationStarted,
    KernelProposed,
    Resumed,
    SessionFinished,
    SessionStarted,
    UsageUpdate,
)
from openkernel.problems import parse_kernelbench_id
from openkernel.store import PROMPTS_DIR, DirectoryStore
from openkernel.traces.schema import TRACE_SCHEMA_VERSION
from openkernel.traces.scrub import scrub

__all__ = ["TraceRow", "build_trace", "problem_fields", "ran_on"]

TraceRow = dict[str, Any]  # one row of OPTIMIZATION_TRACE, as pyarrow's from_pylist takes it


@dataclass
class _Attempt:
    """What one attempt at an iteration recorded, gathered until its Decision."""

    started: IterationStarted
    deltas: list[str] = field(default_factory=list)
    usage: list[UsageUpdate] = field(default_factory=list)
    proposed: KernelProposed | None = None
    evaluated: EvaluationFinished | None = None
    diagnosis: DiagnosisMade | None = None
    proposal_in_unix_s: float | None = None  # when the generator's proposal was in (its first consequence)


def build_trace(session_dir: Path) -> TraceRow:
    """The trace of the session recorded in ``session_dir``; ``StoreError`` when it is not a readable session."""
    store = DirectoryStore.open(session_dir)
    events = store.read_events().events
    started = next((e for e in events if isinstance(e, SessionStarted)), None)
    if started is None:
        raise StoreError(f"{session_dir} has no session_started event: there is no session to trace in it")
    attempts: dict[int, _Attempt] = {}
    rows: dict[int, TraceRow] = {}
    best: Decision | None = None
    total_tokens, total_cost_usd = 0, None
    finish_reason: str | None = None
    for e in events:
        if isinstance(e, IterationStarted):
            attempts[e.iteration] = _Attempt(e)
        elif isinstance(e, SessionFinished):
            finish_reason = e.reason
        elif isinstance(e, Resumed):
            finish_reason = None
        elif isinstance(e, UsageUpdate):
            total_tokens, total_cost_usd = e.total_tokens, e.total_cost_usd
            if e.iteration is not None and e.iteration in attempts:
                _mark_proposal_in(attempts[e.iteration], e.at_unix_s).usage.append(e)
        elif isinstance(e, GeneratorDelta | KernelProposed | EvaluationFinished | DiagnosisMade | Decision):
            attempt = attempts.get(e.iteration)
            if attempt is None:
                continue  # a line without its IterationStarted: nothing to attach it to
            if isinstance(e, GeneratorDelta):
                attempt.deltas.append(e.text)
            elif isinstance(e, KernelProposed):
                _mark_proposal_in(attempt, e.at_unix_s).proposed = e
            elif isinstance(e, EvaluationFinished):
                attempt.evaluated = e
            elif isinstance(e, DiagnosisMade):
                attempt.diagnosis = e
            else:
                rows[e.iteration] = _iteration(_mark_proposal_in(attempt, e.at_unix_s), e, session_dir)
                best = e
    final_iteration = best.best_iteration if best is not None else None
    final = rows.get(final_iteration) if final_iteration is not None else None
    row: TraceRow = {
        "schema_version": TRACE_SCHEMA_VERSION,
        "session_id": store.session_id,
        "problem": problem_fields(started.problem_name),
        "problem_source": _read_text(Path(started.problem_path)),
        "hardware": ran_on(started.device, started.hardware_label),
        "device": started.device,
        "backend": started.backend,
        "model": started.model,
        "iterations": [rows[i] for i in sorted(rows)],
        "iteration_count": len(rows),
        "final_iteration": final_iteration,
        "final_speedup": (final["eval_result"] or {}).get("speedup") if final is not None else None,
        "final_kernel": final["kernel_code"] if final is not None else None,
        "total_tokens": total_tokens,
        "total_cost_usd": total_cost_usd,
        "total_time_seconds": events[-1].at_unix_s - started.at_unix_s,
        "started_at_unix_s": started.at_unix_s,
        "finish_reason": finish_reason,
    }
    scrubbed: TraceRow = _scrubbed(row)
    return scrubbed


def problem_fields(name: str) -> dict[str, Any]:
    """The ``problem`` struct: a KernelBench id (``L1#23``) keeps its level and id, anything else is custom."""
    kb = parse_kernelbench_id(name)
    if kb is None:
        return {"key": f"custom:{name}", "name": name, "kernelbench_level": None, "kernelbench_id": None}
    return {"key": f"L{kb[0]}#{kb[1]}", "name": name, "kernelbench_level": kb[0], "kernelbench_id": kb[1]}


def _mark_proposal_in(attempt: _Attempt, at_unix_s: float) -> _Attempt:
    if attempt.proposal_in_unix_s is None:
        attempt.proposal_in_unix_s = at_unix_s
    return attempt


def _iteration(attempt: _Attempt, decision: Decision, session_dir: Path) -> TraceRow:
    start = attempt.started
    usage = attempt.usage
    prompt_tokens = completion_tokens = tokens_used = None  # None: the generator reported no usage
    if usage:
        prompt_tokens = sum(u.prompt_tokens for u in usage)
        completion_tokens = sum(u.completion_tokens for u in usage)
        tokens_used = prompt_tokens + completion_tokens
    costs = [u.cost_usd for u in usage if u.cost_usd is not None]
    proposed = attempt.proposed
    return {
        "iteration": start.iteration,
        "backend": start.backend,
        "intent": proposed.intent if proposed is not None and proposed.intent else start.intent,
        "hints": list(start.hints),
        "prompt": _read_text(session_dir / PROMPTS_DIR / f"iter_{start.iteration:04d}.md"),
        "response": "".join(attempt.deltas) if attempt.deltas else None,
        "kernel_code": _read_text(session_dir / proposed.kernel_file) if proposed is not None else None,
        "eval_result": _eval_result(attempt.evaluated.result_json) if attempt.evaluated is not None else None,
        "critic_diagnosis": _diagnosis(attempt.diagnosis.diagnosis_json) if attempt.diagnosis is not None else None,
        "decision": decision.decision,
        "decision_reason": decision.reason,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "tokens_used": tokens_used,
        "cost_usd": sum(costs) if costs else None,
        "latency_seconds": (attempt.proposal_in_unix_s or decision.at_unix_s) - start.at_unix_s,
        "wall_seconds": decision.at_unix_s - start.at_unix_s,
        "started_at_unix_s": start.at_unix_s,
    }


_PROFILE_KEYS = {  # trace field -> EvalResult.to_json()["profile"] key
    "bottleneck": "bottleneck",
    "bound_by": "bound_by",
    "pct_of_peak": "pct_of_peak",
    "headroom": "headroom",
    "sol_time_ms": "sol_time_ms",
    "flops": "flops",
    "min_bytes": "min_bytes",
    "arithmetic_intensity_flops_per_byte": "arithmetic_intensity",
    "dtype": "dtype",
    "compute_ceiling": "compute_ceiling",
    "achieved_bytes_per_s": "achieved_bytes_per_s",
    "achieved_flops_per_s": "achieved_flops_per_s",
}


def _eval_result(result: dict[str, Any]) -> dict[str, Any]:
    profile = result.get("profile")
    return {
        "status": result.get("status"),
        "correctness": result.get("status") == "correct",
        "speedup": result.get("speedup"),
        "runtime_ms": result.get("runtime_ms"),
        "reference_runtime_ms": result.get("reference_runtime_ms"),
        "timing_valid": result.get("timing_valid"),
        "timing_note": result.get("timing_note"),
        "reasons": list(result.get("reasons") or []),
        "device": result.get("device"),
        "size": result.get("size"),
        "wall_seconds": result.get("wall_seconds"),
        "profile": {k: profile.get(j) for k, j in _PROFILE_KEYS.items()} if isinstance(profile, dict) else None,
    }


def _diagnosis(diagnosis: dict[str, Any]) -> dict[str, Any]:
    steps = [s for s in diagnosis.get("next_steps") or [] if isinstance(s, dict)]
    return {
        "bottleneck": diagnosis.get("bottleneck"),
        "headline": diagnosis.get("headline"),
        "lead": diagnosis.get("lead"),
        "evidence": list(diagnosis.get("evidence") or []),
        "signals": list(diagnosis.get("signals") or []),
        "changes": list(diagnosis.get("changes") or []),
        "next_steps": [
            {
                "title": s.get("title"),
                "why": s.get("why"),
                "skill_ids": list(s.get("skill_ids") or []),
                "expected_effect": s.get("expected_effect"),
                "rank": s.get("rank"),
                "profile_driven": s.get("profile_driven"),
            }
            for s in steps
        ],
    }


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _scrubbed(value: Any, done: dict[str, str] | None = None) -> Any:
    """``value`` with every string in it scrubbed: a secret can hide in any free text, not only the big ones.

    ``done`` remembers the strings already scrubbed: a session repeats many (reasons, headlines, titles).
    """
    done = {} if done is None else done
    if isinstance(value, str):
        if value not in done:
            done[value] = scrub(value)
        return done[value]
    if isinstance(value, dict):
        return {k: _scrubbed(v, done) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v, done) for v in value]
    return value


def ran_on(device: str, hardware_label: str) -> str:
    """Where the session's kernels ran: the GPU's name ("NVIDIA H200"), or "cpu" for the interpreter.

    Not the roofline's target GPU: a CPU session's times say nothing about an H200, and its traces
    must not be filed or counted with the H200's.
    """
    if not device.startswith("cuda"):
        return "cpu"
    name = device.partition("(")[2].rstrip(")").strip()
    return name or hardware_label
