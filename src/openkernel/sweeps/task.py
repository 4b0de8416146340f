"""One problem's session, as a Ray task runs it on whichever node Ray chose.

The task gets plain values (:class:`SessionJob`: the problem, the session plan, the folder to record
into) and nothing secret: Ray keeps task arguments in its control store, where anyone on the cluster
can read them. API keys come from the node's own environment and config files, as they would for
``kernel-code optimize`` there (on a local Ray, the driver's environment, which its workers inherit;
on a cluster, each node's). The session is recorded exactly as a local one is, into the shared
session store; the task returns its :class:`SessionOutcome`.

``OPENKERNEL_SWEEP_TEST_KILL=<problem>`` makes a task kill its own worker (SIGKILL) on that problem's
first attempt, once its session has started: how the tests stand for a node lost mid-session.
"""

from __future__ import annotations

import os
import signal
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from openkernel.errors import ProblemNotFound
from openkernel.events import IterationStarted
from openkernel.launch import SessionPlan, build_critic, build_evaluator, build_generator
from openkernel.loop import LoopOptions, optimize, this_device
from openkernel.problems import load_problem
from openkernel.settings import key_environment, load_settings
from openkernel.store import DirectoryStore
from openkernel.sweeps.outcome import SessionOutcome, outcome_of
from openkernel.types import Problem

__all__ = ["TEST_KILL_VAR", "SessionJob", "pin_devices", "run_session"]

TEST_KILL_VAR = "OPENKERNEL_SWEEP_TEST_KILL"


@dataclass(frozen=True)
class SessionJob:
    problem: Problem
    plan: SessionPlan
    session_dir: Path  # created by the task; a retry gets a new one
    attempt: int
    cwd: Path  # where the sweep was started: the project's kernel-code.toml is looked for from here


def pin_devices(gpu_ids: Sequence[object], environ: MutableMapping[str, str]) -> str:
    """Pin this process (and the evaluator's workers, which inherit it) to the GPUs Ray assigned; the
    evaluator's device. Ray sets ``CUDA_VISIBLE_DEVICES`` itself; set again here so that the pinning
    does not depend on a Ray default, and emptied on a CPU slot, which must not touch a GPU that
    another session is timing on."""
    environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpu_ids)
    return "cuda" if gpu_ids else "cpu"


def run_session(job: SessionJob) -> SessionOutcome:
    """Run the job's session to its end (the plan's budgets); its outcome."""
    import ray

    device = pin_devices(ray.get_gpu_ids(), os.environ)
    problem = _problem_here(job.problem)
    env = key_environment(load_settings(cwd=job.cwd))
    store = DirectoryStore.create_at(job.session_dir, problem.name, job.plan.config)
    generator = build_generator(job.plan, problem, store.path, env)
    critic = build_critic(job.plan, env)
    evaluator = build_evaluator(job.plan, device)
    kill = os.environ.get(TEST_KILL_VAR) == problem.name and job.attempt == 1
    options = LoopOptions(device=_device_label(device, os.environ))
    for event in optimize(problem, generator, evaluator, store, job.plan.config, critic, options=options):
        if kill and isinstance(event, IterationStarted):
            os.kill(os.getpid(), signal.SIGKILL)
    outcome = outcome_of(store.path)
    assert outcome is not None  # optimize() returns only after its SessionFinished is on disk
    return outcome


def _device_label(device: str, environ: MutableMapping[str, str]) -> str | None:
    """The session's device, with which of the node's GPUs Ray gave it (None: the loop's own label)."""
    if device != "cuda":
        return None
    return f"{this_device()}, GPU {environ.get('CUDA_VISIBLE_DEVICES', '?')} of the node"


def _problem_here(problem: Problem) -> Problem:
    """The problem on this node: a bundled one from this node's install, any other at the same path."""
    if problem.source == "bundled":
        return load_problem(problem.name)
    if not problem.path.is_file():
        raise ProblemNotFound(
            f"{problem.path} is not on this node: a sweep on a cluster needs its problem files at the same "
            "path on every node (a shared file system, or the same checkout)"
        )
    return problem
