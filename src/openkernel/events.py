"""The engine's events: what happened in a session, one frozen dataclass per kind.

The loop yields these, the session store appends them to ``events.jsonl`` one per line, and the
TUI, the dashboard and the traces read them back. ``to_json`` and ``from_json`` are the only way
in and out of JSON, and ``from_json`` is strict: the file on disk is an edge, so an unknown kind, a
missing field, a wrongly typed value or a field from a newer schema is an ``EventFormatError`` that
says what is wrong. Every line carries ``schema_version``; changing an event's shape means bumping
``SCHEMA_VERSION`` (STYLE rule 8), never rewriting old lines.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from openkernel.errors import EventFormatError
from openkernel.types import EvalStatus

__all__ = [
    "EVENT_KINDS",
    "SCHEMA_VERSION",
    "Decision",
    "DecisionKind",
    "DiagnosisMade",
    "EvaluationFinished",
    "Event",
    "EventFormatError",
    "GeneratorDelta",
    "IterationStarted",
    "KernelProposed",
    "Paused",
    "Resumed",
    "SessionConfig",
    "SessionFinished",
    "SessionStarted",
    "UsageUpdate",
    "config_from_json",
    "from_json",
    "to_json",
]

SCHEMA_VERSION = 2  # written in every line; bump it when an event's fields change

# Fields added after schema 1: (kind, field) -> the schema that added them. An older line may lack
# them, and then reads with the field's default (what the old writer could not know).
_ADDED_IN: dict[tuple[str, str], int] = {
    ("iteration_started", "backend"): 2,
    ("iteration_started", "hints"): 2,
}

DecisionKind = Literal["keep", "discard", "error"]


@dataclass(frozen=True)
class SessionConfig:
    """The settings a session runs with; written to ``config.json`` and into ``SessionStarted``."""

    backend: str  # "triton" or "cuda"
    model: str  # the generator's model, "offline" for the template generator
    size: str  # "full" or "small"
    max_iterations: int | None  # None: no iteration budget
    wall_time_budget_s: float | None  # None: no time budget
    token_budget: int | None  # prompt + completion tokens; None: no budget
    cost_budget_usd: float | None  # None: no cost budget


@dataclass(frozen=True)
class _EventBase:
    kind: ClassVar[str]
    session_id: str
    at_unix_s: float  # time.time() when the event happened


@dataclass(frozen=True)
class SessionStarted(_EventBase):
    kind: ClassVar[str] = "session_started"
    problem_name: str
    problem_path: str
    backend: str
    model: str
    device: str  # "cuda:0 (NVIDIA H200)" or "cpu (Triton interpreter)"
    hardware_label: str  # the GPU the roofline is drawn for, "NVIDIA H200"
    config: SessionConfig


@dataclass(frozen=True)
class IterationStarted(_EventBase):
    kind: ClassVar[str] = "iteration_started"
    iteration: int
    intent: str | None  # what this iteration sets out to try; None when the generator has not said yet
    backend: str | None = None  # the backend this iteration writes for; None only in schema-1 sessions
    hints: tuple[str, ...] = ()  # the user's steering this iteration must take, oldest first


@dataclass(frozen=True)
class GeneratorDelta(_EventBase):
    kind: ClassVar[str] = "generator_delta"
    iteration: int
    text: str  # the next chunk of the generator's streamed reply


@dataclass(frozen=True)
class KernelProposed(_EventBase):
    kind: ClassVar[str] = "kernel_proposed"
    iteration: int
    kernel_file: str  # relative to the session directory: "kernels/iter_0007.py"
    intent: str | None
    source_sha256: str  # hex digest of the file's UTF-8 bytes


@dataclass(frozen=True)
class EvaluationFinished(_EventBase):
    kind: ClassVar[str] = "evaluation_finished"
    iteration: int
    result_json: dict[str, Any]  # EvalResult.to_json(): the ``kernel-code eval --json`` contract

    def result_status(self) -> EvalStatus:
        return EvalStatus(self.result_json["status"])


@dataclass(frozen=True)
class DiagnosisMade(_EventBase):
    kind: ClassVar[str] = "diagnosis_made"
    iteration: int
    diagnosis_json: dict[str, Any]  # Diagnosis.to_json()


@dataclass(frozen=True)
class Decision(_EventBase):
    """Keep, discard or error: the event that completes an iteration (resume redoes one without it)."""

    kind: ClassVar[str] = "decision"
    iteration: int
    decision: DecisionKind
    reason: str
    speedup: float | None  # reference / candidate; None when not timed
    best_iteration: int | None  # the best kept iteration after this decision; None: nothing kept yet


@dataclass(frozen=True)
class UsageUpdate(_EventBase):
    kind: ClassVar[str] = "usage_update"
    iteration: int | None  # None: usage outside an iteration
    prompt_tokens: int  # this call
    completion_tokens: int  # this call
    cost_usd: float | None  # this call; None when the model's price is unknown
    total_tokens: int  # the session so far
    total_cost_usd: float | None  # the session so far


@dataclass(frozen=True)
class Paused(_EventBase):
    kind: ClassVar[str] = "paused"
    iteration: int | None  # the next iteration to run when resumed
    reason: str


@dataclass(frozen=True)
class Resumed(_EventBase):
    kind: ClassVar[str] = "resumed"
    iteration: int | None  # the iteration that runs next
    reason: str  # "resumed after the process was killed: iteration 7 is redone"
    torn_line: str | None  # the unterminated last line this resume closes off, exactly as read; None: none


@dataclass(frozen=True)
class SessionFinished(_EventBase):
    kind: ClassVar[str] = "session_finished"
    reason: str  # "iteration budget spent", "stopped by the user", ...
    best_iteration: int | None
    best_speedup: float | None
    iterations: int  # completed iterations


Event = (
    SessionStarted
    | IterationStarted
    | GeneratorDelta
    | KernelProposed
    | EvaluationFinished
    | DiagnosisMade
    | Decision
    | UsageUpdate
    | Paused
    | Resumed
    | SessionFinished
)

_CLASSES: tuple[type[_EventBase], ...] = (
    SessionStarted,
    IterationStarted,
    GeneratorDelta,
    KernelProposed,
    EvaluationFinished,
    DiagnosisMade,
    Decision,
    UsageUpdate,
    Paused,
    Resumed,
    SessionFinished,
)
_BY_KIND: dict[str, type[_EventBase]] = {cls.kind: cls for cls in _CLASSES}
EVENT_KINDS: tuple[str, ...] = tuple(sorted(_BY_KIND))


def to_json(event: Event) -> dict[str, Any]:
    """The event as one JSON object: ``schema_version`` and ``kind`` first, then its fields."""
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "kind": event.kind}
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        out[field.name] = dataclasses.asdict(value) if isinstance(value, SessionConfig) else value
    return out


def from_json(data: Any) -> Event:
    """The event ``data`` (a parsed JSON object) describes; ``EventFormatError`` saying what is wrong."""
    if not isinstance(data, Mapping):
        raise EventFormatError(f"an event must be a JSON object, got {_json_type(data)}")
    version = data.get("schema_version")
    if version is None:
        raise EventFormatError("the event has no 'schema_version' field")
    if not _is_int(version) or version < 1:
        raise EventFormatError(f"schema_version must be a whole number of 1 or more, got {version!r}")
    kind = data.get("kind")
    if kind is None:
        raise EventFormatError("the event has no 'kind' field")
    cls = _BY_KIND.get(kind) if isinstance(kind, str) else None
    names = list(_field_names(cls)) if cls is not None else []
    extra = [k for k in data if k not in ("schema_version", "kind", *names)]
    if version > SCHEMA_VERSION:
        unknown = f" (with {_quoted('field', extra)} unknown here)" if extra else ""
        raise EventFormatError(
            f"{_a(kind)} of schema_version {version}{unknown} needs a newer kernel-code: "
            f"this one reads schema_version {SCHEMA_VERSION}; upgrade kernel-code"
        )
    if cls is None:
        raise EventFormatError(f"unknown event kind {kind!r} (known: {', '.join(EVENT_KINDS)})")
    if extra:
        raise EventFormatError(f"{_a(kind)} has unknown {_quoted('field', extra)}")
    missing = [n for n in names if n not in data and _ADDED_IN.get((kind, n), 1) <= version]
    if missing:
        raise EventFormatError(f"{_a(kind)} is missing {_quoted('field', missing)}")
    event = typing.cast(Event, _build(cls, data, _a(kind), ""))
    if isinstance(event, EvaluationFinished) and event.result_json.get("status") not in set(EvalStatus):
        raise EventFormatError(
            f"{_a(kind)}'s result_json has status {event.result_json.get('status')!r}, "
            f"not one of {', '.join(s.value for s in EvalStatus)}"
        )
    return event


_HINTS: dict[type[Any], dict[str, Any]] = {}
_FIELDS: dict[type[Any], tuple[str, ...]] = {}


def _field_names(cls: type[Any]) -> tuple[str, ...]:
    """``cls``'s dataclass fields in order, once per class (not its ClassVars, which type hints include)."""
    if cls not in _FIELDS:
        _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return _FIELDS[cls]


def _type_hints(cls: type[Any]) -> dict[str, Any]:
    """``cls``'s resolved field types, once per class: resolving them per line dominated reading a long session."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _build(cls: type[Any], data: Mapping[str, Any], what: str, prefix: str) -> Any:
    """``cls`` from ``data`` (whose keys are checked); errors name ``what``'s field ``prefix`` + its name."""
    hints = _type_hints(cls)
    values: dict[str, Any] = {}
    for name in _field_names(cls):
        if name in data:  # absent only where an older schema lacked it: the default stands
            values[name] = _value(data[name], hints[name], what, prefix + name)
    return cls(**values)


def _value(value: Any, hint: Any, what: str, path: str) -> Any:
    """``value`` checked against ``hint`` (and a JSON whole number made a float where a float is wanted)."""
    # The plain cases first: most fields of most lines (reading a 10,000-iteration session parses 40,000).
    kind = type(value)
    if (hint is str and kind is str) or (hint is int and kind is int):
        return value
    if hint is float and kind in (float, int):
        return float(value)
    where = f"{what}'s field {path!r}" if path else what
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        non_none = [o for o in options if o is not type(None)]
        if len(non_none) == 1:
            try:
                return _value(value, non_none[0], what, path)
            except EventFormatError:
                return _fail(value, hint, where)
    elif origin is Literal:
        if value in typing.get_args(hint):
            return value
    elif hint is SessionConfig:
        if isinstance(value, Mapping):
            names = [f.name for f in dataclasses.fields(SessionConfig)]
            missing = [n for n in names if n not in value]
            extra = [k for k in value if k not in names]
            if missing:
                raise EventFormatError(f"{where} is missing {_quoted('field', missing)}")
            if extra:
                raise EventFormatError(f"{where} has unknown {_quoted('field', extra)}")
            return _build(SessionConfig, value, what, f"{path}." if path else "")
    elif origin is tuple:
        (item, _) = typing.get_args(hint)  # tuple[X, ...]: a JSON array of X
        if isinstance(value, list):
            return tuple(_value(v, item, what, f"{path}[{i}]") for i, v in enumerate(value))
    elif origin is dict:
        if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
            return dict(value)
    elif hint is float:
        if _is_int(value) or isinstance(value, float):
            return float(value)
    elif hint is int:
        if _is_int(value):
            return value
    elif hint is str and isinstance(value, str):
        return value
    return _fail(value, hint, where)


def _fail(value: Any, hint: Any, where: str) -> Any:
    got = "null" if value is None else f"{_json_type(value)} {value!r}"
    raise EventFormatError(f"{where} must be {_describe(hint)}, got {got}")


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return " or ".join(_describe(o) for o in typing.get_args(hint))
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(hint))
    if origin is dict or hint is SessionConfig:
        return "an object"
    if origin is tuple:
        return f"an array of {_describe(typing.get_args(hint)[0]).removeprefix('a ')}s"
    return {float: "a number", int: "a whole number", str: "a string", type(None): "null"}[hint]


def _a(kind: Any) -> str:
    return f"{'an' if str(kind)[:1] in tuple('aeiou') else 'a'} {kind!r} event"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _quoted(noun: str, names: list[str]) -> str:
    listed = ", ".join(repr(n) for n in names)
    return f"{noun} {listed}" if len(names) == 1 else f"{noun}s {listed}"


def config_from_json(data: Any) -> SessionConfig:
    """The ``SessionConfig`` a parsed JSON object (``config.json``'s "config") describes, checked strictly."""
    config: SessionConfig = _value(data, SessionConfig, "the session config", "")
    return config
