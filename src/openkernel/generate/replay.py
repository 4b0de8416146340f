"""The replay generator: proposes a recorded session's kernels again, to re-time them on this machine.

A session recorded on one machine (say an H200) holds every kernel it tried as a file, with the
verdict and timing it got there. Replaying it runs a new session that proposes exactly those
kernels, byte for byte, in iteration order, so the evaluator measures them here; :func:`compare`
then lines the recorded figures up with the new ones. Iterations that recorded no kernel (a reply
without code) have nothing to replay: they are skipped and counted.

The replay's iteration ``i`` proposes the ``i``-th recorded kernel, whatever was proposed before:
a replay session that was killed resumes at the right kernel. Once they are all proposed,
:meth:`ReplayGenerator.exhausted` ends the session with a reason that says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from openkernel.errors import ConfigError, InternalError, StoreError
from openkernel.events import Decision, EvaluationFinished, Event, KernelProposed, SessionStarted
from openkernel.generate.base import Context, Generator, Proposal
from openkernel.store import DirectoryStore

__all__ = [
    "RecordedKernel",
    "Recording",
    "ReplayGenerator",
    "ReplayRow",
    "compare",
    "device_warning",
    "find_session",
    "read_recording",
]


@dataclass(frozen=True)
class RecordedKernel:
    """One kernel of the recorded session, with what it got there."""

    iteration: int  # in the recorded session
    intent: str | None  # the recorded generator's words
    kernel_file: str  # relative to the recorded session's directory: "kernels/iter_0003.py"
    source: str  # the file's text (its SHA-256 checked against the recording)
    status: str | None  # EvalStatus value; None: never evaluated (the process was killed first)
    runtime_ms: float | None  # None: not timed
    speedup: float | None  # reference / candidate; None: not timed


@dataclass(frozen=True)
class Recording:
    """What a replay needs from a recorded session (see :func:`read_recording`)."""

    path: Path  # the recorded session's directory
    session_id: str
    problem_name: str
    problem_path: str  # as recorded; it may not exist on this machine
    backend: str  # "triton" or "cuda"
    size: str  # "full", "small" or "auto", as the session was configured
    device: str  # where it ran: "cuda:0 (NVIDIA H200)", "cpu (Triton interpreter)"
    kernels: tuple[RecordedKernel, ...]  # in iteration order
    without_kernel: tuple[int, ...]  # completed iterations that recorded no kernel: skipped

    def summary(self) -> str:
        """ "2 recorded kernels; 1 iteration without a kernel skipped (#2)"."""
        text = f"{_count(len(self.kernels), 'recorded kernel')}"
        if self.without_kernel:
            listed = ", ".join(f"#{i}" for i in self.without_kernel)
            text += f"; {_count(len(self.without_kernel), 'iteration')} without a kernel skipped ({listed})"
        return text


def find_session(ref: str, home: Path) -> Path:
    """A session directory from what the user typed: a directory, or a session id under ``home``."""
    for path in (Path(ref), home / ref):
        if path.is_dir():
            return path
    raise ConfigError(
        f"no recorded session {ref!r}: pass a session directory, or a session id that `kernel-code sessions` "
        f"lists (under {home})"
    )


def read_recording(path: Path) -> Recording:
    """The recorded session at ``path``; a :class:`ConfigError` saying what to do when it cannot be replayed."""
    try:
        store = DirectoryStore.open(path)
        events = store.read_events().events
    except StoreError as err:
        raise ConfigError(f"cannot replay {path}: {err}") from err
    started = next((e for e in events if isinstance(e, SessionStarted)), None)
    if started is None:
        raise ConfigError(
            f"cannot replay {path}: it recorded no session start; pick another with `kernel-code sessions`"
        )
    proposed: dict[int, KernelProposed] = {}
    results: dict[int, EvaluationFinished] = {}
    decided: set[int] = set()
    for e in events:  # a redone iteration records again: its last kernel and result win
        if isinstance(e, KernelProposed):
            proposed[e.iteration] = e
            results.pop(e.iteration, None)
        elif isinstance(e, EvaluationFinished):
            results[e.iteration] = e
        elif isinstance(e, Decision):
            decided.add(e.iteration)
    kernels = tuple(_kernel(store.path, proposed[i], results.get(i)) for i in sorted(proposed))
    if not kernels:
        raise ConfigError(
            f"cannot replay {path}: it recorded no kernels ({_count(len(decided), 'iteration')}, none with code); "
            "pick another session with `kernel-code sessions`"
        )
    return Recording(
        path=store.path,
        session_id=store.session_id,
        problem_name=started.problem_name,
        problem_path=started.problem_path,
        backend=started.backend,
        size=started.config.size,
        device=started.device,
        kernels=kernels,
        without_kernel=tuple(sorted(decided - set(proposed))),
    )


def _kernel(session_dir: Path, proposed: KernelProposed, result: EvaluationFinished | None) -> RecordedKernel:
    path = session_dir / proposed.kernel_file
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(
            f"cannot replay {session_dir}: iteration {proposed.iteration}'s kernel {path} cannot be read "
            f"({err.strerror}); the session is damaged, pick another"
        ) from err
    if hashlib.sha256(data).hexdigest() != proposed.source_sha256:
        raise ConfigError(
            f"cannot replay {session_dir}: {path} was changed after it was recorded (its SHA-256 differs), "
            "so it is not the kernel that was timed; restore it or pick another session"
        )
    figures = result.result_json if result is not None else {}
    return RecordedKernel(
        iteration=proposed.iteration,
        intent=proposed.intent,
        kernel_file=proposed.kernel_file,
        source=data.decode("utf-8"),
        status=str(figures["status"]) if result is not None else None,
        runtime_ms=_number(figures.get("runtime_ms")),
        speedup=_number(figures.get("speedup")),
    )


class ReplayGenerator(Generator):
    """Proposes the kernels of the session recorded at ``session_dir``, one per iteration, then is exhausted."""

    name = "replay"

    def __init__(self, session_dir: Path) -> None:
        self.recording = read_recording(session_dir)

    def check_fits(self, problem_name: str, backend: str) -> None:
        """A ConfigError when a session on ``problem_name`` with ``backend`` would not re-time these kernels."""
        rec = self.recording
        if problem_name != rec.problem_name:
            raise ConfigError(
                f"session {rec.session_id} was recorded on problem {rec.problem_name!r}, not {problem_name!r}: "
                f"run `kernel-code replay {rec.path}`, or name that problem"
            )
        if backend != rec.backend:
            raise ConfigError(
                f"session {rec.session_id} was recorded with --backend {rec.backend}: pass --backend {rec.backend}"
            )

    def propose(self, context: Context, on_text: Callable[[str], None] | None = None) -> Proposal:
        kernels = self.recording.kernels
        if not 0 <= context.iteration < len(kernels):
            raise InternalError(f"the replay was asked for kernel {context.iteration} of {len(kernels)}")
        kernel = kernels[context.iteration]
        text = f"kernel of iteration {kernel.iteration} of session {self.recording.session_id} ({kernel.kernel_file})"
        if on_text is not None:
            on_text(text)
        intent = f"replay #{kernel.iteration}: {kernel.intent or '(no intent)'}"
        return Proposal(source=kernel.source, intent=intent, text=text, usage=None, error=None)

    def exhausted(self, iteration: int) -> str | None:
        if iteration < len(self.recording.kernels):
            return None
        text = f"replay finished: {_count(len(self.recording.kernels), 'recorded kernel')} re-evaluated"
        skipped = self.recording.without_kernel
        return text + (f" ({_count(len(skipped), 'iteration')} without a kernel skipped)" if skipped else "")


@dataclass(frozen=True)
class ReplayRow:
    """One recorded kernel: its figures then and now (``new_*`` None until it has been re-evaluated)."""

    iteration: int  # in the recorded session
    intent: str | None
    recorded_status: str | None
    recorded_runtime_ms: float | None
    recorded_speedup: float | None
    new_status: str | None
    new_runtime_ms: float | None
    new_speedup: float | None
    # (new - recorded) / recorded x 100: negative is faster; None: not both timed, or timed on different devices
    runtime_change_pct: float | None


def compare(recording: Recording, events: Iterable[Event]) -> tuple[ReplayRow, ...]:
    """One row per recorded kernel, from the replay session's ``events`` (its iteration i replays kernel i).

    A time measured on another device than the recording's is shown but not compared (see ``device_warning``).
    """
    new: dict[int, EvaluationFinished] = {}
    comparable = True
    for e in events:
        if isinstance(e, SessionStarted):
            comparable = device_warning(recording.device, e.device) is None
        elif isinstance(e, KernelProposed):
            new.pop(e.iteration, None)  # a redone iteration: only its own result counts
        elif isinstance(e, EvaluationFinished):
            new[e.iteration] = e
    rows = []
    for index, kernel in enumerate(recording.kernels):
        result = new.get(index)
        figures = result.result_json if result is not None else {}
        runtime_ms = _number(figures.get("runtime_ms"))
        change = None
        if comparable and runtime_ms is not None and kernel.runtime_ms:
            change = (runtime_ms - kernel.runtime_ms) / kernel.runtime_ms * 100.0
        rows.append(
            ReplayRow(
                iteration=kernel.iteration,
                intent=kernel.intent,
                recorded_status=kernel.status,
                recorded_runtime_ms=kernel.runtime_ms,
                recorded_speedup=kernel.speedup,
                new_status=str(figures["status"]) if result is not None else None,
                new_runtime_ms=runtime_ms,
                new_speedup=_number(figures.get("speedup")),
                runtime_change_pct=change,
            )
        )
    return tuple(rows)


def device_warning(recorded_device: str, device: str) -> str | None:
    """One line when the kernels were timed on another device than now; None when it is the same."""
    if recorded_device == device:
        return None
    return f"recorded on {recorded_device}, re-timed on {device}: times are not comparable"


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
