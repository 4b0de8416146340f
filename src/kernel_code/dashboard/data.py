"""Reading a session directory for the dashboard: incrementally, so that a live session costs little.

:class:`SessionReader` remembers how far into ``events.jsonl`` it has read and parses only the lines
added since; an unterminated (torn) last line is left for the next poll, when its newline may have
arrived. The events fold into plain rows (:class:`IterationRow`), one per iteration (its last attempt),
which the figures turn into plots. Deep profiles (``kernel-code profile --json`` output) live beside
the events as ``profiles/iter_NNNN.json`` and are read on demand.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from openkernel.errors import EventFormatError, StoreError
from openkernel.events import (
    Decision,
    EvaluationFinished,
    IterationStarted,
    KernelProposed,
    Resumed,
    SessionFinished,
    SessionStarted,
    from_json,
)
from openkernel.profile.ncu import KernelProfile, SourceLineCounters
from openkernel.store import CONFIG_FILE, EVENTS_FILE

__all__ = [
    "PROFILES_DIR",
    "DeepProfile",
    "IterationRow",
    "SessionData",
    "SessionHeader",
    "SessionReader",
    "load_deep_profile",
    "profile_path",
    "profiled_iterations",
]

PROFILES_DIR = "profiles"  # profiles/iter_NNNN.json: a `kernel-code profile --json` of that iteration's kernel
_PROFILE_NAME = re.compile(r"^iter_(\d{4,})\.json$")
# Lines the dashboard never shows: skipped before JSON parsing (the writer puts "kind" second, see to_json).
_SKIPPED = (b'"kind": "generator_delta"', b'"kind": "usage_update"', b'"kind": "diagnosis_made"')


@dataclass(frozen=True)
class SessionHeader:
    session_id: str
    problem_name: str
    backend: str | None
    model: str | None
    device: str | None  # None until SessionStarted is read
    hardware_label: str | None  # the GPU the roofline is drawn for
    started_at_unix_s: float | None


@dataclass(frozen=True)
class IterationRow:
    """One iteration as the dashboard shows it; ``None`` where the session did not get that far."""

    iteration: int
    intent: str
    kernel_file: str | None  # relative to the session directory
    status: str | None  # the EvalStatus value; None: no kernel was evaluated
    decision: str | None  # "keep", "discard", "error"; None while undecided
    reason: str
    speedup: float | None
    runtime_ms: float | None
    reference_runtime_ms: float | None
    timing_valid: bool
    profile: dict[str, Any] | None = field(default=None, compare=False)  # the roofline JSON of the result
    at_unix_s: float | None = None  # when the decision (or the last event) was made


@dataclass(frozen=True)
class SessionData:
    """A snapshot of one session: what the figures are functions of."""

    path: Path
    header: SessionHeader
    rows: tuple[IterationRow, ...]  # by iteration, ascending
    best_iteration: int | None
    finished: bool
    version: int  # grows with every poll that read something new


@dataclass(frozen=True)
class DeepProfile:
    """A deep (Nsight Compute) profile of one iteration's kernel, from ``profiles/iter_NNNN.json``."""

    iteration: int
    kernels: tuple[KernelProfile, ...]
    message: str


class SessionReader:
    """Reads one session directory incrementally; ``poll()`` folds in what was appended since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        events = path / EVENTS_FILE
        if not events.is_file():
            raise StoreError(f"{path} is not a kernel-code session: it has no {EVENTS_FILE}")
        self._offset = 0  # bytes of events.jsonl already folded (always just after a newline)
        self._rows: dict[int, IterationRow] = {}
        self._best: int | None = None
        self._finished = False
        self._version = 0
        self._header = _header_from_config(path)
        self.skipped_lines = 0  # lines that were not events (a closed-off torn line), for the page's note

    def poll(self) -> bool:
        """Read the lines appended since the last poll; True when anything new was folded in."""
        with open(self.path / EVENTS_FILE, "rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        end = chunk.rfind(b"\n")
        if end < 0:
            return False  # nothing, or only the start of a line still being written
        for raw in chunk[: end + 1].splitlines():
            if raw and not any(marker in raw[:64] for marker in _SKIPPED):
                self._fold_line(raw)
        self._offset += end + 1
        self._version += 1
        return True

    def snapshot(self) -> SessionData:
        rows = tuple(self._rows[i] for i in sorted(self._rows))
        return SessionData(self.path, self._header, rows, self._best, self._finished, self._version)

    def _fold_line(self, raw: bytes) -> None:
        try:
            event = from_json(json.loads(raw))
        except (ValueError, EventFormatError):  # a torn line that a Resumed closed off: not an event
            self.skipped_lines += 1
            return
        if isinstance(event, SessionStarted):
            self._header = replace(
                self._header,
                backend=event.backend,
                model=event.model,
                device=event.device,
                hardware_label=event.hardware_label,
                started_at_unix_s=self._header.started_at_unix_s or event.at_unix_s,
            )
        elif isinstance(event, IterationStarted):
            self._rows[event.iteration] = _empty_row(event.iteration, event.intent or "", event.at_unix_s)
        elif isinstance(event, KernelProposed):
            row = self._row(event.iteration, event.at_unix_s)
            self._rows[event.iteration] = replace(row, kernel_file=event.kernel_file, intent=event.intent or row.intent)
        elif isinstance(event, EvaluationFinished):
            self._rows[event.iteration] = _with_result(self._row(event.iteration, event.at_unix_s), event.result_json)
        elif isinstance(event, Decision):
            row = self._row(event.iteration, event.at_unix_s)
            self._rows[event.iteration] = replace(
                row, decision=event.decision, reason=event.reason, speedup=event.speedup, at_unix_s=event.at_unix_s
            )
            self._best = event.best_iteration
        elif isinstance(event, SessionFinished | Resumed):
            self._finished = isinstance(event, SessionFinished)

    def _row(self, iteration: int, at_unix_s: float) -> IterationRow:
        return self._rows.get(iteration) or _empty_row(iteration, "", at_unix_s)


def _empty_row(iteration: int, intent: str, at_unix_s: float) -> IterationRow:
    return IterationRow(iteration, intent, None, None, None, "", None, None, None, False, None, at_unix_s)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _with_result(row: IterationRow, result: dict[str, Any]) -> IterationRow:
    profile = result.get("profile")
    return replace(
        row,
        status=str(result.get("status")),
        speedup=_number(result.get("speedup")),
        runtime_ms=_number(result.get("runtime_ms")),
        reference_runtime_ms=_number(result.get("reference_runtime_ms")),
        timing_valid=result.get("timing_valid") is True,
        profile=profile if isinstance(profile, dict) else None,
    )


def _header_from_config(path: Path) -> SessionHeader:
    """What ``config.json`` says before any event is read; a missing or odd file leaves blanks."""
    try:
        header = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        header = {}
    header = header if isinstance(header, dict) else {}
    found = header.get("config")
    config: dict[str, Any] = found if isinstance(found, dict) else {}
    created = _number(header.get("created_at_unix_s"))
    return SessionHeader(
        session_id=str(header.get("session_id") or path.name),
        problem_name=str(header.get("problem_name") or "?"),
        backend=config.get("backend") if isinstance(config.get("backend"), str) else None,
        model=config.get("model") if isinstance(config.get("model"), str) else None,
        device=None,
        hardware_label=None,
        started_at_unix_s=created,
    )


# ------------------------------------------------------------------------------------ deep profiles


def profile_path(session_dir: Path, iteration: int) -> Path:
    return session_dir / PROFILES_DIR / f"iter_{iteration:04d}.json"


def profiled_iterations(session_dir: Path) -> tuple[int, ...]:
    """Iterations that have a deep profile file, ascending."""
    folder = session_dir / PROFILES_DIR
    if not folder.is_dir():
        return ()
    found = (_PROFILE_NAME.match(p.name) for p in folder.iterdir())
    return tuple(sorted(int(m.group(1)) for m in found if m))


def load_deep_profile(session_dir: Path, iteration: int) -> DeepProfile | None:
    """The deep profile of ``iteration``; None when there is none. A malformed file is a ``StoreError``."""
    path = profile_path(session_dir, iteration)
    if not path.is_file():
        return None
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        kernels = tuple(_kernel(k) for k in payload["kernels"])
        message = str(payload.get("message", ""))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise StoreError(
            f"{path} is not a deep profile ({type(err).__name__}: {err}): write it with `kernel-code profile --json`"
        ) from None
    return DeepProfile(iteration, kernels, message)


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _kernel(data: dict[str, Any]) -> KernelProfile:
    lines = tuple(
        SourceLineCounters(
            file=str(line.get("file", "")),
            line=int(line["line"]),
            source=str(line.get("source", "")),
            **{name: _int_or_none(line.get(name)) for name in _LINE_COUNTERS},
        )
        for line in data.get("source_lines", ())
    )
    ints = ("registers_per_thread", "shared_bytes_per_block", "spill_bytes", "dram_bytes")
    floats = (
        "dram_throughput_pct",
        "l2_hit_rate_pct",
        "l1_hit_rate_pct",
        "achieved_occupancy_pct",
        "theoretical_occupancy_pct",
        "sm_throughput_pct",
        "tensor_pipe_active_pct",
        "duration_ms",
    )
    numbers: dict[str, Any] = {name: _int_or_none(data.get(name)) for name in ints}
    numbers.update({name: _number(data.get(name)) for name in floats})
    return KernelProfile(
        kernel_name=str(data["kernel_name"]),
        launch_index=int(data.get("launch_index", 0)),
        grid_size=data.get("grid_size"),
        block_size=data.get("block_size"),
        top_stalls=tuple((str(r), float(p)) for r, p in data.get("top_stalls", ())),
        source_lines=lines,
        **numbers,
    )


_LINE_COUNTERS = (
    "instructions_executed",
    "stall_samples",
    "l2_sectors_global",
    "l2_sectors_global_ideal",
    "l2_sectors_global_excessive",
    "l2_sectors_local",
    "l1_wavefronts_shared",
    "l1_wavefronts_shared_ideal",
)
