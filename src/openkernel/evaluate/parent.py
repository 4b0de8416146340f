"""The trusted parent: runs the reference and candidate workers, compares, times, and judges.

This process never imports candidate code. It picks the secret seeds, holds the expected outputs,
feeds the candidate worker one trial (and one timed call) at a time, compares every output it
gets back, applies the integrity gates, and builds the :class:`EvalResult`. A failing kernel
always ends as a result with a status; only a broken *problem* raises (``BadProblem``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from openkernel.errors import BadProblem, CandidateNotFound
from openkernel.evaluate.candidate_run import CandidateRun
from openkernel.evaluate.channel import ChannelError, ChannelTimeout
from openkernel.evaluate.config import EvalConfig
from openkernel.evaluate.plan import Context, Plan, Reference, make_plan, worker_env
from openkernel.evaluate.process import WorkerProcess
from openkernel.evaluate.reading import decode_outputs, opt_num
from openkernel.profile import WorkCount
from openkernel.types import EvalResult, EvalStatus, Problem

__all__ = ["evaluate_candidate"]


def evaluate_candidate(problem: Problem, candidate: Path, config: EvalConfig | None = None) -> EvalResult:
    """Evaluate one candidate file against one problem. Never raises for a bad *kernel*."""
    config = config or EvalConfig()
    candidate = Path(candidate)
    if not candidate.is_file():
        raise CandidateNotFound(f"candidate file {candidate} does not exist: pass the path of a file defining ModelNew")
    started = time.monotonic()
    plan = make_plan(problem, config)
    env = worker_env(plan)
    ref_worker = WorkerProcess("reference", env, config.cache_dir)
    cand_worker = WorkerProcess("candidate", env, config.cache_dir)  # imports/builds while the reference runs
    try:
        ctx = Context(problem, candidate, plan, config, env, started)
        cand_worker.channel.send(candidate_job(ctx))
        waited = time.monotonic()
        with _device_lock(plan.device, config.cache_dir):
            if plan.device.startswith("cuda"):  # on the CPU there is no lock to wait for
                ctx.phase_seconds["waiting for the GPU"] = round(time.monotonic() - waited, 3)
            return _judge(ctx, ref_worker, cand_worker)
    finally:
        ref_worker.finish(kill=True)
        cand_worker.finish(kill=True)


@contextlib.contextmanager
def _device_lock(device: str, cache_dir: Path) -> Iterator[None]:
    """One evaluation at a time runs and times on a GPU; builds and imports go on outside the lock."""
    if not device.startswith("cuda"):
        yield
        return
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "_") or "none"
    path = cache_dir / "locks" / f"gpu-{visible}-{device.replace(':', '')}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _judge(ctx: Context, ref_worker: WorkerProcess, cand_worker: WorkerProcess) -> EvalResult:
    before = time.monotonic()
    ref = _run_reference(ref_worker, ctx.problem, ctx.plan, ctx.config)
    ctx.phase_seconds["reference"] = round(time.monotonic() - before, 3)
    # The candidate's clock starts once the reference is done: its import ran alongside the
    # reference, and waiting for the reference is not the candidate's time.
    run = CandidateRun(cand_worker, ref, ctx, time.monotonic())
    run.execute()
    second: CandidateRun | None = None
    if (
        run.status is EvalStatus.CORRECT
        and run.speedup is not None
        and run.speedup > ctx.config.remeasure_above
        and time.monotonic() < run.deadline
    ):
        # A large speedup is measured again in a fresh process before anyone sees it.
        fresh = WorkerProcess("candidate", ctx.env, ctx.config.cache_dir)
        fresh.channel.send(candidate_job(ctx))
        second = CandidateRun(fresh, ref, ctx, time.monotonic())
        second.execute()
    return run.result(second)


def candidate_job(ctx: Context) -> dict[str, Any]:
    on_gpu = ctx.plan.device.startswith("cuda")
    return {
        "kind": "job",
        "problem": str(ctx.problem.path),
        "candidate": str(ctx.candidate.resolve()),
        "sizes": ctx.plan.sizes,
        "device": ctx.plan.device,
        "backend": ctx.config.backend,
        "cache_dir": str(ctx.config.cache_dir),
        "cuda_mode": "build" if on_gpu else "compile_only",
        "build_timeout_s": ctx.config.cuda_build_timeout_s,
    }


# --------------------------------------------------------------------------------------- reference


def _run_reference(worker: WorkerProcess, problem: Problem, plan: Plan, config: EvalConfig) -> Reference:
    worker.channel.send(
        {
            "kind": "job",
            "problem": str(problem.path),
            "sizes": plan.sizes,
            "device": plan.device,
            "trials": plan.trials,
            "timing": {"warmup": plan.warmup, "schedule": plan.schedule, "checked": plan.checked},
            "compile_baseline": config.compile_baseline,
        }
    )
    deadline = time.monotonic() + config.reference_timeout_s
    ref = Reference()
    try:
        while True:
            frame = worker.channel.recv(deadline)
            kind = frame.kind
            if kind == "ready":
                ref.device_label = str(frame.header.get("device", plan.device))
                ref.atol, ref.rtol = opt_num(frame.header.get("atol")), opt_num(frame.header.get("rtol"))
            elif kind == "ops":
                ref.aten_ops = [str(op) for op in frame.header.get("aten_ops", [])]
            elif kind == "trial":
                structure, tensors = decode_outputs(frame)
                for t in tensors:
                    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                        raise BadProblem(
                            f"{problem.path}: the reference output has NaN or Inf (trial {frame.header['index']}); "
                            "fix get_inputs() or the model so the reference is finite"
                        )
                ref.expected.append((structure, tensors))
                if frame.header.get("index") == 0:
                    ref.input_bytes = int(frame.header.get("input_bytes") or 0)
                    ref.has_weights = bool(frame.header.get("has_weights"))
                    ref.degenerate = [str(c) for c in frame.header.get("controls_pass") or []]
            elif kind == "checked":
                ref.checked[int(frame.header["sample"])] = decode_outputs(frame)
            elif kind == "work":
                ref.work, ref.work_error = _work(frame.header)
            elif kind == "timing":
                ref.timing = frame.header
            elif kind == "compile_timing":
                ref.compile_timing = frame.header
            elif kind == "error":
                raise BadProblem(
                    f"{problem.path}: the reference failed ({frame.header.get('stage')}): "
                    f"{frame.header.get('error_type')}: {frame.header.get('message')}"
                )
            elif kind == "done":
                return ref
    except ChannelTimeout:
        raise BadProblem(
            f"{problem.path}: the reference took longer than {config.reference_timeout_s:.0f} s; use a smaller size"
        ) from None
    except ChannelError as exc:
        info = worker.finish(kill=True)
        raise BadProblem(
            f"{problem.path}: the reference worker failed ({exc}; exit {info.returncode}, {info.signal_name or ''}): "
            f"{worker.log.text()[-600:]}"
        ) from None


def _work(header: dict[str, Any]) -> tuple[WorkCount | None, str | None]:
    if not header.get("ok"):
        return None, str(header.get("error", "counting failed"))
    try:
        return WorkCount.from_json(header), None
    except (KeyError, TypeError, ValueError) as exc:
        return None, f"unreadable work count: {exc}"
