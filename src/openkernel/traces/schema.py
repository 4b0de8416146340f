"""The trace schema: one OptimizationTrace row per session, its IterationTraces nested inside.

One row per session keeps a session's trace in one place: a dataset directory gets one file per
session (appending never touches another session's file), and a single ``.parquet`` file holds as
many sessions as rows, with the same schema. Per-iteration analysis unnests ``iterations``
(``SELECT unnest(iterations, recursive := true)`` in duckdb, ``explode`` in pandas or polars).

Typed all the way down where the engine's shapes are stable: the evaluation (with its roofline
profile) and the critic's diagnosis are structs, not JSON strings. Times are ``*_unix_s`` seconds and
``*_seconds`` durations, as in the engine's events. ``schema_version`` is bumped whenever a field
changes meaning or type; readers refuse a version newer than theirs.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["DIAGNOSIS", "EVAL_RESULT", "ITERATION_TRACE", "OPTIMIZATION_TRACE", "PROFILE", "TRACE_SCHEMA_VERSION"]

TRACE_SCHEMA_VERSION = 1

_TEXTS = pa.list_(pa.string())

# The roofline of the problem on the session's GPU, and where the kernel stands against it.
PROFILE = pa.struct(
    [
        ("bottleneck", pa.string()),  # memory_bound, compute_bound, latency_bound, under_utilised; null: not timed
        ("bound_by", pa.string()),  # "memory" or "compute": the larger speed-of-light term
        ("pct_of_peak", pa.float64()),  # achieved percent of the ceiling named by bound_by
        ("headroom", pa.float64()),  # measured time / speed-of-light time; 1.0 is perfect
        ("sol_time_ms", pa.float64()),
        ("flops", pa.int64()),
        ("min_bytes", pa.int64()),
        ("arithmetic_intensity_flops_per_byte", pa.float64()),
        ("dtype", pa.string()),
        ("compute_ceiling", pa.string()),  # "fp32", "tf32", "fp16", "bf16", "fp8"
        ("achieved_bytes_per_s", pa.float64()),
        ("achieved_flops_per_s", pa.float64()),
    ]
)

# One evaluation of a candidate (EvalResult.to_json, trimmed to what a model learns from).
EVAL_RESULT = pa.struct(
    [
        ("status", pa.string()),  # an EvalStatus value: correct, incorrect, compile_error, ...
        ("correctness", pa.bool_()),  # status == "correct"
        ("speedup", pa.float64()),  # reference / candidate; null when not both timed
        ("runtime_ms", pa.float64()),
        ("reference_runtime_ms", pa.float64()),
        ("timing_valid", pa.bool_()),  # false for CPU (Triton interpreter) timings
        ("timing_note", pa.string()),
        ("reasons", _TEXTS),  # the evaluator's reasons, most important first
        ("device", pa.string()),
        ("size", pa.string()),  # "full" or "small"
        ("wall_seconds", pa.float64()),  # the whole evaluation
        ("profile", PROFILE),
    ]
)

NEXT_STEP = pa.struct(
    [
        ("title", pa.string()),
        ("why", pa.string()),
        ("skill_ids", _TEXTS),
        ("expected_effect", pa.string()),
        ("rank", pa.int32()),
        ("profile_driven", pa.bool_()),
    ]
)

# The critic's diagnosis of the iteration's kernel (Diagnosis.to_json).
DIAGNOSIS = pa.struct(
    [
        ("bottleneck", pa.string()),
        ("headline", pa.string()),
        ("lead", pa.string()),
        ("evidence", _TEXTS),
        ("signals", _TEXTS),
        ("changes", _TEXTS),
        ("next_steps", pa.list_(NEXT_STEP)),
    ]
)

ITERATION_TRACE = pa.struct(
    [
        ("iteration", pa.int32()),
        ("backend", pa.string()),  # this iteration's backend (a session can switch)
        ("intent", pa.string()),
        ("hints", _TEXTS),  # the user's steering this iteration took
        ("prompt", pa.string()),  # the full prompt (system and user); null: the generator is not an LLM
        ("response", pa.string()),  # the generator's full streamed reply; null: it streamed nothing
        ("kernel_code", pa.string()),  # null: no kernel could be extracted (decision "error")
        ("eval_result", EVAL_RESULT),  # null: nothing was evaluated
        ("critic_diagnosis", DIAGNOSIS),  # null: no diagnosis
        ("decision", pa.string()),  # keep, discard or error
        ("decision_reason", pa.string()),
        ("prompt_tokens", pa.int64()),  # null: the generator reported no usage
        ("completion_tokens", pa.int64()),
        ("tokens_used", pa.int64()),  # prompt + completion
        ("cost_usd", pa.float64()),  # null: no price known, or no usage
        ("latency_seconds", pa.float64()),  # from the iteration's start until the proposal was in
        ("wall_seconds", pa.float64()),  # from the iteration's start until its decision
        ("started_at_unix_s", pa.float64()),
    ]
)

PROBLEM = pa.struct(
    [
        ("key", pa.string()),  # "L1#23" for KernelBench, else "custom:<name>"
        ("name", pa.string()),  # the name the session ran under
        ("kernelbench_level", pa.int32()),  # null: not a KernelBench problem
        ("kernelbench_id", pa.int32()),
    ]
)

OPTIMIZATION_TRACE = pa.schema(
    [
        ("schema_version", pa.int32()),
        ("session_id", pa.string()),
        ("problem", PROBLEM),
        ("problem_source", pa.string()),  # the reference file's text; null when it could not be read at export
        ("hardware", pa.string()),  # where it ran: the GPU, "NVIDIA H200", or "cpu" (the Triton interpreter)
        ("device", pa.string()),  # where it ran, "cuda:0 (NVIDIA H200)" or "cpu (Triton interpreter)"
        ("backend", pa.string()),  # the backend the session started with: triton or cuda
        ("model", pa.string()),  # the generator's model, "anthropic:claude-...", "human", ...
        ("iterations", pa.list_(ITERATION_TRACE)),  # the decided iterations, in order
        ("iteration_count", pa.int32()),
        ("final_iteration", pa.int32()),  # the best kept iteration; null: nothing kept
        ("final_speedup", pa.float64()),
        ("final_kernel", pa.string()),
        ("total_tokens", pa.int64()),  # prompt + completion over the whole session
        ("total_cost_usd", pa.float64()),  # null: no price known
        ("total_time_seconds", pa.float64()),  # from the session's start to its last recorded event
        ("started_at_unix_s", pa.float64()),
        ("finish_reason", pa.string()),  # null: the session has not finished (killed, or still running)
    ]
)
