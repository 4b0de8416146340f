"""The sweep's driver: one Ray task per problem, each outcome into the record, a dead task tried again.

Retries are the driver's, not Ray's (tasks run with ``max_retries=0``): Ray would retry a task whose
worker died with the same arguments, into the same session folder, and without telling anyone. Here
each attempt records into a new session folder, and the record says which attempt died and why
before the next one is submitted. A task that raises (a bad key, a problem file missing on the node)
is not retried: it would raise again. Tasks run with ``max_calls=1``: each session gets a fresh
worker process, so nothing (a CUDA context, an imported candidate) carries over to the next.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openkernel.errors import StoreError
from openkernel.store import new_session_id
from openkernel.sweeps.cluster import Cluster, TaskResources, connected, task_resources
from openkernel.sweeps.config import SweepConfig
from openkernel.sweeps.outcome import SessionOutcome, outcome_of
from openkernel.sweeps.record import (
    AttemptFailed,
    AttemptFinished,
    AttemptSubmitted,
    FailureCause,
    SweepEntry,
    SweepFinished,
    SweepRecord,
    SweepResumed,
    SweepStarted,
)
from openkernel.sweeps.summary import rows_of
from openkernel.sweeps.task import SessionJob, run_session
from openkernel.traces.scrub import scrub
from openkernel.types import Problem

__all__ = ["ClusterReady", "SweepEvent", "run_new", "run_resumed"]

REASON_CHARS = 500  # a failure's reason in the record is cut to this many characters


@dataclass(frozen=True)
class ClusterReady:
    """Ray is up (not a record entry): where the sessions run, and what each holds."""

    sweep_id: str
    cluster: Cluster
    resources: TaskResources


SweepEvent = SweepEntry | ClusterReady


@dataclass(frozen=True)
class _Attempt:
    problem: Problem
    number: int  # the attempt's number over the sweep's life (resumes continue the count)
    tries: int  # tries in this run, against max_attempts
    session_dir: Path


def run_new(record: SweepRecord, started: SweepStarted, config: SweepConfig) -> Iterator[SweepEvent]:
    record.append(started)
    yield started
    yield from _Driver(record, started, config).run([(p, 1) for p in started.problems])


def run_resumed(record: SweepRecord, config: SweepConfig) -> Iterator[SweepEvent]:
    """Run again the problems without a finished session; a session that finished while the driver
    was away is taken as it is, one that did not is marked abandoned (and left on disk)."""
    started = record.started()
    rows = {r.problem: r for r in rows_of(record.read())}
    todo: list[tuple[Problem, int]] = []
    late: list[SweepEntry] = []
    now = time.time()
    for problem in started.problems:
        row = rows[problem.name]
        if row.status == "finished":
            continue
        if row.status == "running" and row.session_dir is not None:
            outcome = _finished_outcome(Path(row.session_dir))
            if outcome is not None:
                late.append(
                    AttemptFinished(started.sweep_id, now, problem.name, row.attempts, row.session_dir, outcome)
                )
                continue
            reason = "the sweep stopped before this session finished"
            late.append(AttemptFailed(started.sweep_id, now, problem.name, row.attempts, row.session_dir,
                                      "abandoned", reason, retried=True))  # fmt: skip
        todo.append((problem, row.attempts + 1))
    resumed = SweepResumed(started.sweep_id, now, config.ray, tuple(p.name for p, _ in todo))
    for entry in (resumed, *late):
        record.append(entry)
        yield entry
    yield from _Driver(record, started, config).run(todo)


def _finished_outcome(session_dir: Path) -> SessionOutcome | None:
    try:
        return outcome_of(session_dir)
    except (StoreError, OSError):
        return None  # never created, or not readable from here: the problem runs again


class _Driver:
    def __init__(self, record: SweepRecord, started: SweepStarted, config: SweepConfig) -> None:
        self.record, self.started, self.config = record, started, config
        self.home = Path(started.home)
        self.pending: dict[Any, _Attempt] = {}  # Ray's ObjectRef -> the attempt it runs

    def emit(self, entry: SweepEntry) -> Iterator[SweepEvent]:
        self.record.append(entry)
        yield entry

    def run(self, todo: Sequence[tuple[Problem, int]]) -> Iterator[SweepEvent]:
        if todo:
            with connected(self.config) as cluster:
                yield from self.drive(todo, cluster)
        rows = rows_of(self.record.read())
        finished = sum(1 for r in rows if r.status == "finished")
        yield from self.emit(SweepFinished(self.started.sweep_id, time.time(), finished, len(rows) - finished))

    def drive(self, todo: Sequence[tuple[Problem, int]], cluster: Cluster) -> Iterator[SweepEvent]:
        import ray
        from ray.exceptions import RayError, RayTaskError

        resources = task_resources(self.config.gpus_per_session, cluster.gpus)
        yield ClusterReady(self.started.sweep_id, cluster, resources)
        remote = ray.remote(max_retries=0, max_calls=1)(run_session)
        for problem, number in todo:
            yield from self.submit(remote, resources, problem, number, tries=1)
        while self.pending:
            ready, _ = ray.wait(list(self.pending), num_returns=1)
            attempt = self.pending.pop(ready[0])
            try:
                outcome: SessionOutcome = ray.get(ready[0])
            except RayTaskError as err:  # the session raised: it would again, so no retry
                cause = err.cause if err.cause is not None else err
                yield from self.failed(attempt, "raised", f"{type(cause).__name__}: {_line(cause)}", retried=False)
            except RayError as err:  # the worker or its node died: try again while attempts are left
                retry = attempt.tries < self.config.max_attempts
                yield from self.failed(attempt, "worker died", _line(err), retried=retry)
                if retry:
                    yield from self.submit(remote, resources, attempt.problem, attempt.number + 1, attempt.tries + 1)
            else:
                yield from self.emit(AttemptFinished(self.started.sweep_id, time.time(), attempt.problem.name,
                                                     attempt.number, str(attempt.session_dir), outcome))  # fmt: skip

    def submit(
        self, remote: Any, resources: TaskResources, problem: Problem, number: int, tries: int
    ) -> Iterator[SweepEvent]:
        session_dir = self.home / new_session_id(problem.name, time.time())
        yield from self.emit(AttemptSubmitted(self.started.sweep_id, time.time(), problem.name, number,
                                              str(session_dir), resources.label))  # fmt: skip
        job = SessionJob(problem, self.started.plan, session_dir, number, Path.cwd())
        name = f"kernel-code session {problem.name} (attempt {number})"
        ref = remote.options(name=name, **resources.options).remote(job)
        self.pending[ref] = _Attempt(problem, number, tries, session_dir)

    def failed(self, attempt: _Attempt, cause: FailureCause, reason: str, retried: bool) -> Iterator[SweepEvent]:
        yield from self.emit(AttemptFailed(self.started.sweep_id, time.time(), attempt.problem.name, attempt.number,
                                           str(attempt.session_dir), cause, reason, retried))  # fmt: skip


def _line(err: BaseException) -> str:
    """The first line of the error's message, scrubbed of anything that looks like a secret, cut short."""
    lines = str(err).strip().splitlines()
    return scrub(lines[0] if lines else type(err).__name__)[:REASON_CHARS]
