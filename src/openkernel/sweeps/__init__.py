"""Sweeps: one optimisation session per problem of a problem set, spread over GPUs and machines by Ray.

``openkernel.sweep(problems, plan, config)`` resolves the problems (files, folders, bundled names,
KernelBench ids and levels), starts or joins Ray (:mod:`openkernel.sweeps.cluster`), runs each
problem's session as a Ray task holding ``gpus_per_session`` GPUs (a CPU slot on a cluster without
GPUs), and yields the sweep's events as its record (:mod:`openkernel.sweeps.record`) takes them.
Sessions are recorded in the session store as local ones are; :func:`summarise` reads a record into
per-problem results, fast_p and the geometric mean speedup (:mod:`openkernel.sweeps.summary`).

Ray is imported only once a sweep runs, never when this package is imported.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from openkernel.errors import ConfigError
from openkernel.launch import SessionPlan, session_plan
from openkernel.problems import resolve_problems
from openkernel.settings import load_settings
from openkernel.sweeps.cluster import Cluster, TaskResources
from openkernel.sweeps.config import SweepConfig, find_sweep, sweeps_home
from openkernel.sweeps.driver import ClusterReady, SweepEvent, run_new, run_resumed
from openkernel.sweeps.outcome import SessionOutcome, outcome_of
from openkernel.sweeps.record import (
    AttemptFailed,
    AttemptFinished,
    AttemptSubmitted,
    SweepEntry,
    SweepFinished,
    SweepRecord,
    SweepResumed,
    SweepStarted,
)
from openkernel.sweeps.summary import FAST_P, ProblemRow, SweepSummary, fast_p, geomean_speedup, summarise
from openkernel.types import Problem

__all__ = [
    "FAST_P",
    "AttemptFailed",
    "AttemptFinished",
    "AttemptSubmitted",
    "Cluster",
    "ClusterReady",
    "ProblemRow",
    "SessionOutcome",
    "SweepConfig",
    "SweepEntry",
    "SweepEvent",
    "SweepFinished",
    "SweepRecord",
    "SweepResumed",
    "SweepStarted",
    "SweepSummary",
    "TaskResources",
    "fast_p",
    "find_sweep",
    "geomean_speedup",
    "outcome_of",
    "resume_sweep",
    "summarise",
    "sweep",
    "sweeps_home",
]


def sweep(
    problems: Sequence[str | Path], plan: SessionPlan | None = None, config: SweepConfig | None = None
) -> Iterator[SweepEvent]:
    """Optimise every problem named, one session each on Ray; yield the sweep's events as they happen.

    ``plan``: how each session runs (None: from the settings, as ``kernel-code optimize`` would).
    ``config``: where (None: a local Ray, one GPU per session). The problems are resolved here, before
    Ray starts, so that a misspelt name fails at once; the record is made when iteration begins.
    Closing the iterator early stops the sweep (a local Ray is shut down with its tasks); the record
    keeps what had finished, and :func:`resume_sweep` continues it.
    """
    config = config or SweepConfig()
    resolved = resolve_problems(problems, config.kernelbench)
    if plan is None or config.home is None:
        settings = load_settings()
        plan = plan or session_plan(settings)
        home = config.home or settings.sessions.home
    else:
        home = config.home
    if plan.config.model.partition(":")[0] == "human":
        raise ConfigError("--model human waits for you to write each kernel: a sweep's sessions run unattended")
    return _new(resolved, plan, config, home)


def _new(problems: list[Problem], plan: SessionPlan, config: SweepConfig, home: Path) -> Iterator[SweepEvent]:
    record = SweepRecord.create(sweeps_home(home))
    started = SweepStarted(record.sweep_id, time.time(), tuple(problems), plan, config.ray, config.gpus_per_session,
                           config.max_attempts, str(home.resolve()))  # fmt: skip
    yield from run_new(record, started, config)


def resume_sweep(spec: str | Path, config: SweepConfig | None = None) -> Iterator[SweepEvent]:
    """Continue the sweep ``spec`` (its folder, or its id under the sessions home): run again each
    problem without a finished session, with the sweep's own session plan; ``config`` says where."""
    config = config or SweepConfig()
    home = config.home or load_settings().sessions.home
    record = SweepRecord.open(find_sweep(spec, home))
    record.started()  # a record that cannot be resumed says so now
    return run_resumed(record, config)
