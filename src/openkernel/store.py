"""The session store: an append-only directory per session, from which a killed session resumes.

Layout of ``<home>/<session id>/`` (home defaults to ``$XDG_DATA_HOME/kernel-code/sessions``)::

    events.jsonl     the source of truth: one event per line, each flushed and fsynced; never rewritten
    config.json      the SessionConfig the session was created with (written once)
    kernels/         every proposed kernel as its own file: iter_0007.py (a redo: iter_0007_redo1.py)
    prompts/         the full prompt of each LLM iteration, scrubbed of secrets: iter_0007.md (for traces)
    best.py          a copy of the best kernel so far (replaced atomically)
    results.tsv      a view regenerated from the events: iteration, status, speedup, runtime_ms, ...

A line is committed once its newline is on disk. A process killed mid-write leaves an unterminated
(torn) last line: reading tolerates and reports it, and the resume closes it off by appending a
``Resumed`` event that quotes it, so that it stays readable in the middle of the file later on. An
iteration is complete once its ``Decision`` is on disk; one started without a ``Decision`` is redone.
"""

from __future__ import annotations

import abc
import dataclasses
import json
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from openkernel.errors import InternalError, StoreError
from openkernel.events import (
    SCHEMA_VERSION,
    Decision,
    EvaluationFinished,
    Event,
    EventFormatError,
    IterationStarted,
    KernelProposed,
    Resumed,
    SessionConfig,
    SessionFinished,
    config_from_json,
    from_json,
    to_json,
)
from openkernel.traces.scrub import scrub

__all__ = [
    "DirectoryStore",
    "MemoryStore",
    "ReadResult",
    "ResumePoint",
    "SessionStore",
    "SessionSummary",
    "StoreError",
    "default_home",
    "list_sessions",
    "new_session_id",
]

EVENTS_FILE = "events.jsonl"
CONFIG_FILE = "config.json"
KERNELS_DIR = "kernels"
PROMPTS_DIR = "prompts"
BEST_FILE = "best.py"
RESULTS_FILE = "results.tsv"
RESULTS_COLUMNS = ("iteration", "status", "speedup", "runtime_ms", "decision", "intent", "kernel")


@dataclass(frozen=True)
class ReadResult:
    events: tuple[Event, ...]
    torn_line: str | None  # the unterminated last line, exactly as read (bad UTF-8 replaced); None: none


@dataclass(frozen=True)
class ResumePoint:
    next_iteration: int  # the interrupted iteration when there is one, else one past the last completed
    completed: tuple[int, ...]  # iterations with a Decision on disk, ascending
    interrupted: int | None  # started but not decided: redo it
    best_iteration: int | None  # from the last Decision
    finished: bool  # a SessionFinished with no Resumed after it


@dataclass(frozen=True)
class SessionSummary:
    """One line of ``kernel-code sessions``; a broken directory has ``error`` set and little else."""

    session_id: str
    path: Path
    problem_name: str | None
    backend: str | None
    model: str | None
    started_at_unix_s: float | None
    iterations_completed: int
    best_speedup: float | None
    finished: bool
    error: str | None  # why the directory could not be read; None: it could


class SessionStore(abc.ABC):
    """Where a session's events go. The loop appends; readers use the concrete store."""

    @abc.abstractmethod
    def append(self, event: Event) -> None:
        """Record ``event`` durably before returning."""


class MemoryStore(SessionStore):
    """The test double: keeps the events in a list (and checks that each would serialise)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def append(self, event: Event) -> None:
        _line(event)
        self.events.append(event)


class DirectoryStore(SessionStore):
    """The real store: one directory per session (see the module docstring for the layout)."""

    def __init__(self, path: Path, session_id: str, problem_name: str, config: SessionConfig) -> None:
        self.path = path
        self.session_id = session_id
        self.problem_name = problem_name
        self.config = config
        self.created_at_unix_s: float | None = None

    @classmethod
    def create(cls, home: Path, problem_name: str, config: SessionConfig) -> DirectoryStore:
        """A new, empty session under ``home``, named like ``20261130-094512-softmax_fp32-3f9a``."""
        home.mkdir(parents=True, exist_ok=True)
        now_unix_s = time.time()
        for _ in range(100):
            session_id = new_session_id(problem_name, now_unix_s)
            path = home / session_id
            try:
                path.mkdir()
            except FileExistsError:
                continue
            break
        else:
            raise StoreError(f"could not pick a free session name in {home}: remove stale sessions there")
        return cls._initialise(path, session_id, problem_name, config, now_unix_s)

    @classmethod
    def create_at(cls, path: Path, problem_name: str, config: SessionConfig) -> DirectoryStore:
        """A new session exactly at ``path`` (``--session-dir``); it must not exist or be an empty folder."""
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise StoreError(f"{path} already exists and is not an empty folder: choose a new --session-dir")
        path.mkdir(parents=True, exist_ok=True)
        return cls._initialise(path, path.name, problem_name, config, time.time())

    @classmethod
    def _initialise(
        cls, path: Path, session_id: str, problem_name: str, config: SessionConfig, now_unix_s: float
    ) -> DirectoryStore:
        (path / KERNELS_DIR).mkdir()
        header = {
            "schema_version": SCHEMA_VERSION,
            "session_id": session_id,
            "problem_name": problem_name,
            "created_at_unix_s": now_unix_s,
            "config": dataclasses.asdict(config),
        }
        _write_atomic(path / CONFIG_FILE, (json.dumps(header, indent=2) + "\n").encode())
        (path / EVENTS_FILE).touch()
        _fsync_dir(path)
        store = cls(path, session_id, problem_name, config)
        store.created_at_unix_s = now_unix_s
        return store

    @classmethod
    def open(cls, path: Path) -> DirectoryStore:
        """An existing session directory; ``StoreError`` saying why when it is not one."""
        if not path.is_dir():
            raise StoreError(f"no session at {path}: list them with `kernel-code sessions`")
        if not (path / EVENTS_FILE).is_file():
            raise StoreError(f"{path} is not a kernel-code session: it has no {EVENTS_FILE}")
        try:
            header = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise StoreError(f"{path / CONFIG_FILE} cannot be read: {err}") from err
        try:
            if not isinstance(header, dict):
                raise EventFormatError("it is not a JSON object")
            version = header.get("schema_version")
            if not isinstance(version, int) or version > SCHEMA_VERSION:
                raise EventFormatError(f"schema_version {version!r} is not one this kernel-code reads")
            config = config_from_json(header.get("config"))
            session_id, problem_name = header.get("session_id"), header.get("problem_name")
            if not isinstance(session_id, str) or not isinstance(problem_name, str):
                raise EventFormatError("it lacks a session_id or problem_name string")
        except EventFormatError as err:
            raise StoreError(f"{path / CONFIG_FILE}: {err}") from err
        store = cls(path, session_id, problem_name, config)
        created = header.get("created_at_unix_s")
        store.created_at_unix_s = float(created) if isinstance(created, int | float) else None
        return store

    def append(self, event: Event) -> None:
        """Append one line and fsync it. A torn last line must first be closed by a ``Resumed`` quoting it."""
        if event.session_id != self.session_id:
            raise InternalError(f"event of session {event.session_id!r} appended to session {self.session_id!r}")
        line = _line(event)
        with open(self.path / EVENTS_FILE, "a+b") as f:
            size = f.seek(0, os.SEEK_END)
            if size:
                f.seek(size - 1)
            if size and f.read(1) != b"\n":
                torn = self.read_events().torn_line
                if not isinstance(event, Resumed) or event.torn_line != torn:
                    raise StoreError(
                        f"{self.path / EVENTS_FILE} ends with a torn line: append a Resumed event whose "
                        "torn_line is ReadResult.torn_line first (resuming the session does this)"
                    )
                line = b"\n" + line
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def read_events(self) -> ReadResult:
        """Every committed event in order; a torn last line is reported, damage elsewhere is a ``StoreError``."""
        path = self.path / EVENTS_FILE
        *complete, last = path.read_bytes().split(b"\n")
        parsed: list[Event | str] = []  # an event, or why the line is not one
        for raw in complete:
            try:
                parsed.append(from_json(json.loads(raw.decode("utf-8"))))
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                parsed.append(f"not JSON ({err})")
            except EventFormatError as err:
                parsed.append(str(err))
        events: list[Event] = []
        for index, item in enumerate(parsed):
            if not isinstance(item, str):
                events.append(item)
                continue
            following = parsed[index + 1] if index + 1 < len(parsed) else None
            text = complete[index].decode("utf-8", errors="replace")
            if not (isinstance(following, Resumed) and following.torn_line == text):
                raise StoreError(f"{path} line {index + 1}: {item}")
        return ReadResult(tuple(events), last.decode("utf-8", errors="replace") if last else None)

    def write_kernel(self, iteration: int, source: str) -> Path:
        """Write ``kernels/iter_NNNN.py`` (a redo of an interrupted iteration gets ``_redoK``); never overwrites."""
        completed = {e.iteration for e in self.read_events().events if isinstance(e, Decision)}
        for attempt in range(1000):
            suffix = f"_redo{attempt}" if attempt else ""
            path = self.path / KERNELS_DIR / f"iter_{iteration:04d}{suffix}.py"
            if not path.exists():
                _write_atomic(path, source.encode("utf-8"))
                return path
            if path.read_text(encoding="utf-8") == source:
                return path
            if iteration in completed:
                raise StoreError(
                    f"refusing to overwrite {path}: iteration {iteration} is complete and its kernel differs"
                )
        raise StoreError(f"iteration {iteration} has been redone 1000 times in {self.path}: start a new session")

    def write_prompt(self, iteration: int, prompt: str) -> Path:
        """Write ``prompts/iter_NNNN.md``, the full prompt of ``iteration``, scrubbed of secrets first.

        Not an event (a prompt is large and no view needs it live) but kept for the traces export; a
        redo of an interrupted iteration replaces it, so it always belongs to the attempt that was decided.
        """
        folder = self.path / PROMPTS_DIR
        folder.mkdir(exist_ok=True)
        path = folder / f"iter_{iteration:04d}.md"
        _write_atomic(path, scrub(prompt).encode("utf-8"))
        return path

    def set_best(self, iteration: int) -> Path:
        """Copy the kernel of ``iteration`` (its last ``KernelProposed``) to ``best.py``, atomically."""
        kernel_files = [
            e.kernel_file
            for e in self.read_events().events
            if isinstance(e, KernelProposed) and e.iteration == iteration
        ]
        if not kernel_files:
            raise StoreError(f"iteration {iteration} proposed no kernel in {self.path}: it cannot be the best")
        best = self.path / BEST_FILE
        _write_atomic(best, (self.path / kernel_files[-1]).read_bytes())
        return best

    def resume_point(self) -> ResumePoint:
        events = self.read_events().events
        started = {e.iteration for e in events if isinstance(e, IterationStarted)}
        decisions = [e for e in events if isinstance(e, Decision)]
        completed = sorted({d.iteration for d in decisions})
        undecided = sorted(started - set(completed))
        interrupted = undecided[0] if undecided else None
        finished = False
        for event in events:
            if isinstance(event, SessionFinished | Resumed):
                finished = isinstance(event, SessionFinished)
        return ResumePoint(
            next_iteration=interrupted if interrupted is not None else (completed[-1] + 1 if completed else 0),
            completed=tuple(completed),
            interrupted=interrupted,
            best_iteration=decisions[-1].best_iteration if decisions else None,
            finished=finished,
        )

    def results_tsv(self) -> Path:
        """Regenerate ``results.tsv`` (a view: one row per decided iteration, its last attempt) and return it."""
        attempt: dict[int, dict[str, str]] = {}
        rows: dict[int, dict[str, str]] = {}
        for e in self.read_events().events:
            if isinstance(e, IterationStarted):
                attempt[e.iteration] = {"iteration": str(e.iteration), "intent": e.intent or ""}
            elif isinstance(e, KernelProposed):
                cells = attempt.setdefault(e.iteration, {"iteration": str(e.iteration)})
                cells["kernel"] = e.kernel_file
                cells["intent"] = e.intent or cells.get("intent", "")
            elif isinstance(e, EvaluationFinished):
                cells = attempt.setdefault(e.iteration, {"iteration": str(e.iteration)})
                cells["status"] = e.result_status().value
                runtime_ms = e.result_json.get("runtime_ms")
                cells["runtime_ms"] = f"{runtime_ms:.4g}" if isinstance(runtime_ms, int | float) else ""
            elif isinstance(e, Decision):
                cells = attempt.setdefault(e.iteration, {"iteration": str(e.iteration)})
                cells["decision"] = e.decision
                cells["speedup"] = f"{e.speedup:.3f}" if e.speedup is not None else ""
                rows[e.iteration] = cells
        lines = ["\t".join(RESULTS_COLUMNS)]
        for iteration in sorted(rows):
            cells = rows[iteration]
            lines.append("\t".join(_cell(cells.get(c, "")) for c in RESULTS_COLUMNS))
        path = self.path / RESULTS_FILE
        _write_atomic(path, ("\n".join(lines) + "\n").encode("utf-8"))
        return path


def new_session_id(problem_name: str, now_unix_s: float) -> str:
    """A fresh session name like ``20261130-094512-softmax_fp32-3f9a`` (the time, the problem, 4 random hex)."""
    safe_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", problem_name).strip("._") or "problem"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now_unix_s))
    return f"{stamp}-{safe_name}-{secrets.token_hex(2)}"


def default_home() -> Path:
    """``$XDG_DATA_HOME/kernel-code/sessions``, or ``~/.local/share/kernel-code/sessions``."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return base / "kernel-code" / "sessions"


def list_sessions(home: Path) -> list[SessionSummary]:
    """Every session under ``home``, oldest first; a broken one is listed with its error, never raised."""
    if not home.is_dir():
        return []
    return [_summary(p) for p in sorted(home.iterdir()) if p.is_dir() and not p.name.startswith(".")]


def _summary(path: Path) -> SessionSummary:
    try:
        store = DirectoryStore.open(path)
        events = store.read_events().events
        point = store.resume_point()
    except (StoreError, OSError) as err:
        return SessionSummary(path.name, path, None, None, None, None, 0, None, False, str(err))
    best_speedup = None
    for e in events:
        if isinstance(e, Decision) and e.iteration == point.best_iteration:
            best_speedup = e.speedup
    return SessionSummary(
        session_id=store.session_id,
        path=path,
        problem_name=store.problem_name,
        backend=store.config.backend,
        model=store.config.model,
        started_at_unix_s=store.created_at_unix_s,
        iterations_completed=len(point.completed),
        best_speedup=best_speedup,
        finished=point.finished,
        error=None,
    )


def _line(event: Event) -> bytes:
    try:
        text = json.dumps(to_json(event), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InternalError(f"a {event.kind!r} event cannot be written as JSON: {err}") from err
    return (text + "\n").encode("utf-8")


def _cell(text: str) -> str:
    return " ".join(text.split())  # a TSV cell holds no tabs or newlines


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
