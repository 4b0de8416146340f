"""The trusted parent: runs the reference and candidate workers, compares, times, and judges.

This process never imports candidate code. It picks the secret seeds, holds the expected outputs,
feeds the candidate worker one trial (and one timed call) at a time, compares every output it
gets back, applies the integrity gates, and builds the :class:`EvalResult`. A failing kernel
always ends as a result with a status; only a broken *problem* raises (``BadProblem``).

On a GPU, evaluations running at once (threads, sessions, a benchmark) share it for their trials
and take it in turns for timing (:class:`GpuLock`): the reference's and the candidate's timed calls
run with nothing else on the GPU.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from openkernel.errors import BadProblem, CandidateNotFound
from openkernel.evaluate.candidate_run import CandidateRun
from openkernel.evaluate.channel import ChannelError, ChannelTimeout
from openkernel.evaluate.config import EvalConfig
from openkernel.evaluate.gpu_lock import GpuLock
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
        with GpuLock(plan.device, config.cache_dir) as gpu:
            result = _judge(ctx, ref_worker, cand_worker, gpu)
        if gpu.on_gpu:  # on the CPU there is no lock to wait for
            phases = {"waiting for the GPU": round(gpu.waited_s, 3), **result.phase_seconds}
            result.phase_seconds.clear()
            result.phase_seconds.update(phases)
        return result
    finally:
        ref_worker.finish(kill=True)
        cand_worker.finish(kill=True)


def _judge(ctx: Context, ref_worker: WorkerProcess, cand_worker: WorkerProcess, gpu: GpuLock) -> EvalResult:
    """Trials with the GPU shared, timing with it exclusive: reference first, then the candidate."""
    before = time.monotonic()
    ref = _run_reference(ref_worker, ctx.problem, ctx.plan, ctx.config, gpu)
    ctx.phase_seconds["reference"] = round(time.monotonic() - before - gpu.waited_s, 3)

    def time_reference() -> dict[str, float]:
        if ref.timing is not None:
            return {}
        gpu.exclusive()
        start = time.monotonic()
        _time_reference(ref_worker, ref, ctx.problem, ctx.config)
        return {"reference timing": round(time.monotonic() - start, 3)}

    # The candidate's clock starts once the reference is done: its import ran alongside the
    # reference, and waiting for the reference (or the GPU) is not the candidate's time.
    # The GPU is let go once the timed calls are done: gates, cleanup and the result need no GPU.
    def expected() -> None:
        _expected_of_checked_calls(ref_worker, ref, ctx.problem, ctx.config)

    run = CandidateRun(
        cand_worker, ref, ctx, time.monotonic(), before_timing=time_reference, after_timing=gpu.idle, expected=expected
    )
    run.execute()
    run.phase_seconds.update(time_reference())  # a candidate that failed before timing still gets the baseline's
    gpu.idle()
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
        gpu.shared()

        def take_gpu() -> dict[str, float]:
            gpu.exclusive()
            return {}

        second = CandidateRun(
            fresh, ref, ctx, time.monotonic(), before_timing=take_gpu, after_timing=gpu.idle, expected=expected
        )
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


def _run_reference(worker: WorkerProcess, problem: Problem, plan: Plan, config: EvalConfig, gpu: GpuLock) -> Reference:
    """The reference's trials: expected outputs, aten ops, work; its timing waits for ``_time_reference``."""
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
    ref = Reference()
    _read_reference(worker, ref, "ready", problem, config)  # started and imported, off the GPU and unlocked
    gpu.shared()
    worker.channel.send({"kind": "go"})
    _read_reference(worker, ref, "trials_done", problem, config)
    return ref


def _time_reference(worker: WorkerProcess, ref: Reference, problem: Problem, config: EvalConfig) -> None:
    """The baseline's timed calls (and torch.compile's), once this evaluation has the GPU to itself."""
    worker.channel.send({"kind": "time"})
    _read_reference(worker, ref, "timed", problem, config)
    if ref.timing is None:
        raise BadProblem(f"{problem.path}: the reference worker finished without timing the reference")


def _expected_of_checked_calls(worker: WorkerProcess, ref: Reference, problem: Problem, config: EvalConfig) -> None:
    """The reference's outputs of the checked timed calls, asked for once the GPU is let go."""
    if ref.checked_received:
        return
    worker.channel.send({"kind": "checked"})
    _read_reference(worker, ref, "done", problem, config)
    ref.checked_received = True


def _read_reference(worker: WorkerProcess, ref: Reference, until: str, problem: Problem, config: EvalConfig) -> None:
    deadline = time.monotonic() + config.reference_timeout_s
    try:
        while True:
            frame = worker.channel.recv(deadline)
            kind = frame.kind
            if kind == "ready":
                ref.atol, ref.rtol = opt_num(frame.header.get("atol")), opt_num(frame.header.get("rtol"))
            elif kind == "device":
                ref.device_label = str(frame.header.get("device", ""))
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
            if kind == until:
                return
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
