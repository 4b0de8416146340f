"""The sweep record: ``sweep.jsonl``, append-only, one entry per line, written by the driver alone.

The driver appends (and fsyncs) an entry before it acts on it, so what the record says happened did:
a sweep's tasks may die with their workers or nodes, the record does not. Entries::

    SweepStarted       the problems, the session plan (no secrets), the Ray address, the sessions home
    AttemptSubmitted   a problem's attempt went to Ray, with the session folder it records into
    AttemptFinished    its session finished: the outcome (best speedup, correctness, tokens, cost)
    AttemptFailed      it raised (not retried), its worker or node died (retried while attempts are
                       left), or the sweep stopped before it ended (found so by a resume, retried)
    SweepResumed       ``--resume``: the problems run again
    SweepFinished      every problem finished or failed

The session folder of a failed attempt stays on disk, partial, and is never reused: a retry records
into a new one. A line is committed once its newline is on disk; a torn last line (the driver killed
mid-write) is skipped when read and closed off before the next append.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import time
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from openkernel.errors import ConfigError
from openkernel.events import SessionConfig
from openkernel.launch import SessionPlan
from openkernel.sweeps.outcome import SessionOutcome
from openkernel.types import Problem

__all__ = [
    "RECORD_FILE",
    "SCHEMA_VERSION",
    "AttemptFailed",
    "AttemptFinished",
    "AttemptSubmitted",
    "FailureCause",
    "SweepEntry",
    "SweepFinished",
    "SweepRecord",
    "SweepResumed",
    "SweepStarted",
]

RECORD_FILE = "sweep.jsonl"
SCHEMA_VERSION = 1
FailureCause = Literal["raised", "worker died", "abandoned"]


@dataclass(frozen=True)
class _EntryBase:
    kind: ClassVar[str]
    sweep_id: str
    at_unix_s: float  # time.time() when the driver wrote it


@dataclass(frozen=True)
class SweepStarted(_EntryBase):
    kind: ClassVar[str] = "sweep_started"
    problems: tuple[Problem, ...]
    plan: SessionPlan
    ray: str  # "local", or the cluster's address as given
    gpus_per_session: float
    max_attempts: int
    home: str  # the sessions home every session of the sweep is recorded under


@dataclass(frozen=True)
class _AttemptBase(_EntryBase):
    problem: str
    attempt: int  # 1, then 2 for the first retry, ...
    session_dir: str  # the folder the attempt's session records into (created by the task)


@dataclass(frozen=True)
class AttemptSubmitted(_AttemptBase):
    kind: ClassVar[str] = "attempt_submitted"
    resources: str  # what the task holds: "1 GPU", "1 CPU slot"


@dataclass(frozen=True)
class AttemptFinished(_AttemptBase):
    kind: ClassVar[str] = "attempt_finished"
    outcome: SessionOutcome


@dataclass(frozen=True)
class AttemptFailed(_AttemptBase):
    """The attempt's session folder (partial, or never made when the task raised first) is left as it is."""

    kind: ClassVar[str] = "attempt_failed"
    cause: FailureCause
    reason: str  # one line, scrubbed of secrets
    retried: bool  # another attempt follows


@dataclass(frozen=True)
class SweepResumed(_EntryBase):
    kind: ClassVar[str] = "sweep_resumed"
    ray: str
    problems: tuple[str, ...]  # the problems without a finished session, run again


@dataclass(frozen=True)
class SweepFinished(_EntryBase):
    kind: ClassVar[str] = "sweep_finished"
    finished: int  # problems with a finished session
    failed: int  # problems without one


SweepEntry = SweepStarted | AttemptSubmitted | AttemptFinished | AttemptFailed | SweepResumed | SweepFinished
_BY_KIND: dict[str, type[Any]] = {
    c.kind: c for c in (SweepStarted, AttemptSubmitted, AttemptFinished, AttemptFailed, SweepResumed, SweepFinished)
}


class SweepRecord:
    """One sweep's folder and its ``sweep.jsonl``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sweep_id = path.name

    @classmethod
    def create(cls, sweeps_home: Path) -> SweepRecord:
        """A new, empty record under ``sweeps_home``, named like ``20261130-094512-3f9a``."""
        sweeps_home.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for _ in range(100):
            path = sweeps_home / f"{stamp}-{secrets.token_hex(2)}"
            try:
                path.mkdir()
            except FileExistsError:
                continue
            (path / RECORD_FILE).touch()
            return cls(path)
        raise ConfigError(f"could not pick a free sweep name in {sweeps_home}: remove stale sweeps there")

    @classmethod
    def open(cls, path: Path) -> SweepRecord:
        if not (path / RECORD_FILE).is_file():
            raise ConfigError(f"{path} is not a sweep: it has no {RECORD_FILE}")
        return cls(path)

    def append(self, entry: SweepEntry) -> None:
        line = json.dumps(to_json(entry), ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
        with open(self.path / RECORD_FILE, "a+b") as f:
            size = f.seek(0, os.SEEK_END)
            if size:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    line = b"\n" + line  # close off a torn last line: it stays, unread, on a line of its own
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def read(self) -> tuple[SweepEntry, ...]:
        """Every committed entry in order. A line that is not JSON is a torn one (each entry is one
        write, so only a crash mid-write leaves one) and is skipped; JSON that is not an entry (a newer
        kernel-code's, or damage) is a ``ConfigError`` naming the line."""
        text = (self.path / RECORD_FILE).read_bytes().decode("utf-8", errors="replace")
        entries: list[SweepEntry] = []
        for number, raw in enumerate(text.split("\n")[:-1], start=1):
            try:
                data = json.loads(raw)
            except json.JSONDecodeError:
                continue
            try:
                entries.append(from_json(data))
            except ValueError as err:
                raise ConfigError(f"{self.path / RECORD_FILE} line {number}: {err}") from None
        return tuple(entries)

    def started(self) -> SweepStarted:
        first = next(iter(self.read()), None)
        if not isinstance(first, SweepStarted):
            raise ConfigError(f"{self.path / RECORD_FILE} does not begin with the sweep's start: it cannot be resumed")
        return first


# ------------------------------------------------------------------------------------------ JSON


def to_json(entry: SweepEntry) -> dict[str, Any]:
    """``schema_version`` and ``kind`` first, then the fields (paths as strings, tuples as arrays)."""
    fields = {f.name: _plain(getattr(entry, f.name)) for f in dataclasses.fields(entry)}
    return {"schema_version": SCHEMA_VERSION, "kind": entry.kind, **fields}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, Path) else value


def from_json(data: Any) -> SweepEntry:
    """The entry ``data`` describes; ``ValueError`` saying what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("an entry must be a JSON object")
    version = data.get("schema_version")
    if not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
        raise ValueError(f"schema_version {version!r} is not one this kernel-code reads (upgrade it)")
    cls = _BY_KIND.get(str(data.get("kind")))
    if cls is None:
        raise ValueError(f"unknown entry kind {data.get('kind')!r}")
    entry: SweepEntry = _build(cls, {k: v for k, v in data.items() if k not in ("schema_version", "kind")})
    return entry


_NESTED = (Problem, SessionPlan, SessionConfig, SessionOutcome)


def _build(cls: type[Any], data: Any) -> Any:
    if not isinstance(data, dict):
        raise ValueError(f"a {cls.__name__} must be a JSON object")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ValueError(f"a {cls.__name__} has unknown fields {unknown}")
    return cls(**{name: _value(data[name], hints[name], name) for name in names if name in data})


def _value(value: Any, hint: Any, name: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return _union(value, args, name)
    if hint in _NESTED:
        return _build(hint, value)
    if origin is tuple:
        items = args[:1] * len(value) if args[-1:] == (...,) and isinstance(value, list) else args
        if not isinstance(value, list) or len(items) != len(value):
            raise ValueError(f"field {name!r} must be an array")
        return tuple(_value(v, h, name) for v, h in zip(value, items, strict=True))
    if origin is Literal:
        if value not in args:
            raise ValueError(f"field {name!r} must be one of {list(args)}, not {value!r}")
        return value
    return _scalar(value, hint, name)


def _union(value: Any, options: tuple[Any, ...], name: str) -> Any:
    for option in options:
        try:
            return _value(value, option, name)
        except ValueError:
            continue
    raise ValueError(f"field {name!r} has a value of the wrong type: {value!r}")


def _scalar(value: Any, hint: Any, name: str) -> Any:
    if hint is Path and isinstance(value, str):
        return Path(value)
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if hint is type(None) and value is None:
        return None
    if hint in (str, int, bool) and type(value) is hint:
        return value
    raise ValueError(f"field {name!r} must be {getattr(hint, '__name__', hint)}, not {value!r}")
