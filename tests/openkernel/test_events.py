"""Events: every kind survives JSON, and ``from_json`` refuses what it cannot read with a message that says why."""

from __future__ import annotations

import json
from typing import Any

import pytest

from openkernel.critic import Diagnosis, NextStep
from openkernel.events import (
    EVENT_KINDS,
    SCHEMA_VERSION,
    Decision,
    DiagnosisMade,
    EvaluationFinished,
    Event,
    EventFormatError,
    GeneratorDelta,
    IterationStarted,
    KernelProposed,
    Paused,
    Resumed,
    SessionConfig,
    SessionFinished,
    SessionStarted,
    UsageUpdate,
    config_from_json,
    from_json,
    to_json,
)
from openkernel.types import EvalResult, EvalStatus, TimingStats, TrialCheck

SID = "20261130-094512-softmax_fp32-3f9a"
CONFIG = SessionConfig(
    backend="triton",
    model="offline",
    size="small",
    max_iterations=10,
    wall_time_budget_s=600.0,
    token_budget=None,
    cost_budget_usd=2.5,
)
TIMING = TimingStats("cuda_events", 100, 0.2, 0.21, 0.19, 0.3, 0.195, 0.22, 0.01, 0.205, None)
RESULT = EvalResult(
    status=EvalStatus.CORRECT,
    reasons=("all checks passed",),
    problem="softmax_fp32",
    candidate="kernels/iter_0002.py",
    backend="triton",
    device="cuda:0 (NVIDIA H200)",
    size="full",
    timing_valid=True,
    timing_note=None,
    runtime_ms=0.2,
    reference_runtime_ms=0.31,
    speedup=1.55,
    compile_baseline_runtime_ms=None,
    candidate_timing=TIMING,
    reference_timing=TIMING,
    trials=(TrialCheck(0, True, None, 1e-7, 1e-6, 0),),
    kernels_launched=(),
    candidate_aten_ops=("aten.empty_like",),
    target_compiles=(),
    profile=None,
    warnings=(),
    wall_seconds=3.5,
    log_tail="",
)
DIAGNOSIS = Diagnosis(
    bottleneck="memory_bound",
    headline="Bottleneck: memory_bound",
    evidence=("Bandwidth: 72% of peak",),
    signals=("low_bandwidth",),
    changes=(),
    next_steps=(NextStep("Fuse the passes", "two reads of x", ("fusion",), "1.5x", 1, True),),
    lead="The kernel reads its input twice",
)

ALL_EVENTS: tuple[Event, ...] = (
    SessionStarted(
        SID, 1.5, "softmax_fp32", "/p/softmax.py", "triton", "offline", "cuda:0 (NVIDIA H200)", "NVIDIA H200", CONFIG
    ),
    IterationStarted(SID, 2.0, 0, "one row per program", "triton", ()),
    IterationStarted(SID, 2.0, 1, None, "cuda", ("use shared memory", "try 8 warps")),
    GeneratorDelta(SID, 2.25, 0, "def kernel(\n\t…"),
    KernelProposed(SID, 3.0, 0, "kernels/iter_0000.py", "one row per program", "ab" * 32),
    EvaluationFinished(SID, 4.0, 0, RESULT.to_json()),
    DiagnosisMade(SID, 4.5, 0, DIAGNOSIS.to_json()),
    Decision(SID, 5.0, 0, "keep", "1.55x over the reference", 1.55, 0),
    Decision(SID, 5.0, 1, "error", "did not compile", None, None),
    UsageUpdate(SID, 5.5, 0, 1200, 300, 0.01, 1500, 0.01),
    UsageUpdate(SID, 5.5, None, 10, 3, None, 1513, None),
    Paused(SID, 6.0, 1, "paused by the user"),
    Resumed(SID, 7.0, 1, "resumed after the process was killed: iteration 1 is redone", '{"schema_ver'),
    Resumed(SID, 7.0, None, "resumed by the user", None),
    SessionFinished(SID, 8.0, "iteration budget spent", 0, 1.55, 10),
    SessionFinished(SID, 8.0, "stopped by the user", None, None, 0),
)


def _line(event: Event) -> dict[str, Any]:
    return dict(json.loads(json.dumps(to_json(event))))


def test_every_kind_is_covered() -> None:
    assert sorted({e.kind for e in ALL_EVENTS}) == list(EVENT_KINDS)
    assert EVENT_KINDS == (
        "decision",
        "diagnosis_made",
        "evaluation_finished",
        "generator_delta",
        "iteration_started",
        "kernel_proposed",
        "paused",
        "resumed",
        "session_finished",
        "session_started",
        "usage_update",
    )


@pytest.mark.parametrize("event", ALL_EVENTS, ids=lambda e: e.kind)
def test_round_trip_through_json_text(event: Event) -> None:
    assert from_json(_line(event)) == event


def test_json_shape_of_a_decision() -> None:
    assert to_json(Decision(SID, 5.0, 3, "discard", "slower", 0.9, 1)) == {
        "schema_version": SCHEMA_VERSION,
        "kind": "decision",
        "session_id": SID,
        "at_unix_s": 5.0,
        "iteration": 3,
        "decision": "discard",
        "reason": "slower",
        "speedup": 0.9,
        "best_iteration": 1,
    }


def test_session_started_nests_its_config() -> None:
    assert _line(ALL_EVENTS[0])["config"] == {
        "backend": "triton",
        "model": "offline",
        "size": "small",
        "max_iterations": 10,
        "wall_time_budget_s": 600.0,
        "token_budget": None,
        "cost_budget_usd": 2.5,
    }


def test_result_status_and_whole_numbers_become_floats() -> None:
    event = from_json(_line(ALL_EVENTS[5]))
    assert isinstance(event, EvaluationFinished)
    assert event.result_status() is EvalStatus.CORRECT
    line = _line(Decision(SID, 5.0, 3, "keep", "x", 2.0, 3)) | {"at_unix_s": 5, "speedup": 2}
    decoded = from_json(line)
    assert decoded == Decision(SID, 5.0, 3, "keep", "x", 2.0, 3)
    assert isinstance(decoded, Decision)
    assert (type(decoded.at_unix_s), type(decoded.speedup)) == (float, float)


def _decision(**changes: Any) -> dict[str, Any]:
    return _line(Decision(SID, 5.0, 3, "keep", "faster", 1.2, 3)) | changes


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "an event must be a JSON object, got an array"),
        ({"kind": "decision"}, "the event has no 'schema_version' field"),
        (_decision(schema_version="1"), "schema_version must be a whole number of 1 or more, got '1'"),
        (_decision(schema_version=0), "schema_version must be a whole number of 1 or more, got 0"),
        ({"schema_version": 1}, "the event has no 'kind' field"),
        (
            _decision(kind="telemetry"),
            "unknown event kind 'telemetry' (known: decision, diagnosis_made, evaluation_finished, generator_delta, "
            "iteration_started, kernel_proposed, paused, resumed, session_finished, session_started, usage_update)",
        ),
        (
            {k: v for k, v in _decision().items() if k not in ("reason", "speedup")},
            "a 'decision' event is missing fields 'reason', 'speedup'",
        ),
        (
            {k: v for k, v in _decision().items() if k != "best_iteration"},
            "a 'decision' event is missing field 'best_iteration'",
        ),
        (_decision(confidence=0.9), "a 'decision' event has unknown field 'confidence'"),
        (
            _decision(schema_version=3, confidence=0.9, votes=3),
            "a 'decision' event of schema_version 3 (with fields 'confidence', 'votes' unknown here) needs a newer "
            "kernel-code: this one reads schema_version 2; upgrade kernel-code",
        ),
        (
            _decision(schema_version=4),
            "a 'decision' event of schema_version 4 needs a newer kernel-code: this one reads schema_version 2; "
            "upgrade kernel-code",
        ),
        (
            _decision(speedup="1.2"),
            "a 'decision' event's field 'speedup' must be a number or null, got a string '1.2'",
        ),
        (
            _decision(iteration=True),
            "a 'decision' event's field 'iteration' must be a whole number, got a boolean True",
        ),
        (_decision(iteration=None), "a 'decision' event's field 'iteration' must be a whole number, got null"),
        (
            _decision(decision="maybe"),
            "a 'decision' event's field 'decision' must be one of 'keep', 'discard', 'error', got a string 'maybe'",
        ),
        (
            _line(ALL_EVENTS[5]) | {"result_json": {"status": "great"}},
            "an 'evaluation_finished' event's result_json has status 'great', not one of correct, incorrect, "
            "compile_error, runtime_error, timeout, rejected, compiled",
        ),
        (
            _line(ALL_EVENTS[6]) | {"diagnosis_json": [1]},
            "a 'diagnosis_made' event's field 'diagnosis_json' must be an object, got an array [1]",
        ),
    ],
)
def test_from_json_is_strict(data: Any, message: str) -> None:
    with pytest.raises(EventFormatError) as info:
        from_json(data)
    assert str(info.value) == message


def test_nested_config_is_strict() -> None:
    line = _line(ALL_EVENTS[0])
    with pytest.raises(EventFormatError) as info:
        from_json(line | {"config": {**line["config"], "max_iterations": 1.5}})
    assert str(info.value) == (
        "a 'session_started' event's field 'config.max_iterations' must be a whole number or null, got a number 1.5"
    )
    with pytest.raises(EventFormatError) as info:
        config_from_json({k: v for k, v in line["config"].items() if k != "model"})
    assert str(info.value) == "the session config is missing field 'model'"
    assert config_from_json(line["config"]) == CONFIG


def test_a_schema_1_iteration_started_reads_with_no_backend_and_no_hints() -> None:
    # Sessions recorded before schema 2 stay readable: the fields they could not carry take their defaults.
    line = {"schema_version": 1, "kind": "iteration_started", "session_id": SID, "at_unix_s": 2.0, "iteration": 4,
            "intent": "user hint: unroll"}  # fmt: skip
    assert from_json(line) == IterationStarted(SID, 2.0, 4, "user hint: unroll", None, ())


def test_schema_2_fields_are_required_and_typed_in_schema_2_lines() -> None:
    line = _line(IterationStarted(SID, 2.0, 1, None, "triton", ("a",)))
    with pytest.raises(EventFormatError) as missing:
        from_json({k: v for k, v in line.items() if k != "hints"})
    assert str(missing.value) == "an 'iteration_started' event is missing field 'hints'"
    with pytest.raises(EventFormatError) as typed:
        from_json(line | {"hints": ["a", 3]})
    assert str(typed.value) == "an 'iteration_started' event's field 'hints[1]' must be a string, got a number 3"
    with pytest.raises(EventFormatError) as not_array:
        from_json(line | {"hints": "a"})
    assert str(not_array.value) == (
        "an 'iteration_started' event's field 'hints' must be an array of strings, got a string 'a'"
    )
