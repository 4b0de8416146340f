"""The trusted parent: runs the reference and candidate workers, compares, times, and judges.

This process never imports candidate code. It picks the secret seeds, holds the expected outputs,
feeds the candidate worker one trial (and one timed call) at a time, compares every output it
gets back, applies the integrity gates, and builds the :class:`EvalResult`. A failing kernel
always ends as a result with a status; only a broken *problem* raises (``BadProblem``).
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import random
import secrets
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from openkernel.errors import BadProblem, CandidateNotFound
from openkernel.evaluate.channel import ChannelClosed, ChannelError, ChannelTimeout, Frame, decode_tensors
from openkernel.evaluate.compare import Tolerance, check_output, tolerance_for
from openkernel.evaluate.config import EvalConfig
from openkernel.evaluate.process import WorkerProcess
from openkernel.hardware import find_spec
from openkernel.types import (
    EvalResult,
    EvalStatus,
    KernelLaunchCount,
    Problem,
    TargetCompile,
    TimingStats,
    TrialCheck,
)

__all__ = ["evaluate_candidate"]

_SIDE_STREAM_SLACK_MS = 0.05  # sync latency allowed between the stream end event and the synced one
_SIDE_STREAM_FRACTION = 0.25
_WALL_SLACK_MS = 1.0  # host-side noise allowed when checking reported times against the parent's clock
_BATCH_TARGET_MS = 20.0  # a parent-timed batch lasts about this long


class _Verdict(Exception):
    """Raised inside the candidate phase to stop at the first decisive finding."""

    def __init__(self, status: EvalStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class _Reference:
    device_label: str = ""
    expected: list[tuple[str, list[torch.Tensor]]] = field(default_factory=list)  # per trial
    checked: dict[int, tuple[str, list[torch.Tensor]]] = field(default_factory=dict)  # per timed call
    aten_ops: list[str] = field(default_factory=list)
    timing: dict[str, Any] | None = None
    compile_timing: dict[str, Any] | None = None
    input_bytes: int = 0
    has_weights: bool = False
    atol: float | None = None
    rtol: float | None = None
    degenerate: list[str] = field(default_factory=list)  # trivial answers that pass (a weak problem)


@dataclass
class _Plan:
    device: str
    size: str
    sizes: list[tuple[str, Any]]
    trials: list[dict[str, int]]
    warmup: int
    samples: int
    schedule: list[tuple[int, int]]
    checked: list[int]


def _resolve_device(requested: str) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise BadProblem("--device cuda was asked for but this machine has no CUDA GPU: use --device cpu or auto")
    return requested


def _plan(problem: Problem, config: EvalConfig) -> _Plan:
    device = _resolve_device(config.device)
    on_gpu = device.startswith("cuda")
    size = config.size if config.size != "auto" else ("full" if on_gpu or not problem.has_small_size else "small")
    if size == "small" and not problem.has_small_size:
        size = "full"
    rng = secrets.SystemRandom()
    trials = [
        {"input_seed": rng.randrange(1, 2**62), "weight_seed": rng.randrange(1, 2**62)} for _ in range(config.trials)
    ]
    warmup = config.warmup if config.warmup is not None else (5 if on_gpu else 1)
    samples = config.samples if config.samples is not None else (50 if on_gpu else 5)
    schedule = [(i % config.trials, rng.randrange(1, 2**62)) for i in range(warmup + samples)]
    timed = list(range(warmup, warmup + samples))
    checked = sorted(random.Random(rng.randrange(2**62)).sample(timed, min(config.checked_samples, len(timed))))
    return _Plan(
        device=device,
        size=size,
        sizes=[*(problem.small_sizes if size == "small" else ()), *config.size_overrides],
        trials=trials,
        warmup=warmup,
        samples=samples,
        schedule=schedule,
        checked=checked,
    )


def _worker_env(plan: _Plan, backend: str) -> dict[str, str]:
    env: dict[str, str] = {}
    if not plan.device.startswith("cuda"):
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def evaluate_candidate(problem: Problem, candidate: Path, config: EvalConfig | None = None) -> EvalResult:
    """Evaluate one candidate file against one problem. Never raises for a bad *kernel*."""
    config = config or EvalConfig()
    candidate = Path(candidate)
    if not candidate.is_file():
        raise CandidateNotFound(f"candidate file {candidate} does not exist: pass the path of a file defining ModelNew")
    started = time.monotonic()
    plan = _plan(problem, config)
    env = _worker_env(plan, config.backend)
    ref_worker = WorkerProcess("reference", env, config.cache_dir)
    cand_worker = WorkerProcess("candidate", env, config.cache_dir)  # imports/builds while the reference runs
    try:
        ctx = _Context(problem, candidate, plan, config, env, started)
        cand_worker.channel.send(_candidate_job(ctx))
        with _device_lock(plan.device, config.cache_dir):
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


@dataclass(frozen=True)
class _Context:
    """What one evaluation is about, handed around as one value."""

    problem: Problem
    candidate: Path
    plan: _Plan
    config: EvalConfig
    env: dict[str, str]
    started: float


def _judge(ctx: _Context, ref_worker: WorkerProcess, cand_worker: WorkerProcess) -> EvalResult:
    ref = _run_reference(ref_worker, ctx.problem, ctx.plan, ctx.config)
    # The candidate's clock starts once the reference is done: its import ran alongside the
    # reference, and waiting for the reference is not the candidate's time.
    run = _CandidateRun(cand_worker, ref, ctx, time.monotonic())
    run.execute()
    second: _CandidateRun | None = None
    if (
        run.status is EvalStatus.CORRECT
        and run.speedup is not None
        and run.speedup > ctx.config.remeasure_above
        and time.monotonic() < run.deadline
    ):
        # A large speedup is measured again in a fresh process before anyone sees it.
        fresh = WorkerProcess("candidate", ctx.env, ctx.config.cache_dir)
        fresh.channel.send(_candidate_job(ctx))
        second = _CandidateRun(fresh, ref, ctx, time.monotonic())
        second.execute()
    return run.result(second)


def _candidate_job(ctx: _Context) -> dict[str, Any]:
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


def _run_reference(worker: WorkerProcess, problem: Problem, plan: _Plan, config: EvalConfig) -> _Reference:
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
    ref = _Reference()
    try:
        while True:
            frame = worker.channel.recv(deadline)
            kind = frame.kind
            if kind == "ready":
                ref.device_label = str(frame.header.get("device", plan.device))
                ref.atol, ref.rtol = _opt_num(frame.header.get("atol")), _opt_num(frame.header.get("rtol"))
            elif kind == "ops":
                ref.aten_ops = [str(op) for op in frame.header.get("aten_ops", [])]
            elif kind == "trial":
                structure, tensors = _decode_outputs(frame)
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
                ref.checked[int(frame.header["sample"])] = _decode_outputs(frame)
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


def _decode_outputs(frame: Frame) -> tuple[str, list[torch.Tensor]]:
    structure = str(frame.header.get("structure", "other"))
    if not frame.header.get("sendable"):
        return structure, []
    return structure, decode_tensors(frame.header.get("tensors"), frame.payload)


# --------------------------------------------------------------------------------------- candidate


class _CandidateRun:
    def __init__(self, worker: WorkerProcess, ref: _Reference, ctx: _Context, started: float) -> None:
        self.worker = worker
        self.ref = ref
        self.ctx = ctx
        self.plan = ctx.plan
        self.config = ctx.config
        self.deadline = started + ctx.config.timeout_s
        self.status = EvalStatus.CORRECT
        self.reasons: list[str] = []
        self.warnings: list[str] = []
        self.trials: list[TrialCheck] = []
        self.samples: list[dict[str, float]] = []
        self.launches: dict[str, int] = {}
        self.aten_ops: list[str] = []
        self.target_compiles: list[TargetCompile] = []
        self.device_label = ""
        self.batch_ms_per_call: list[float] = []  # the parent's own clock, round trip removed
        self.ping_ms: list[float] = []
        self.stage = "import"
        self.speedup: float | None = None
        self.timing: TimingStats | None = None

    # -- driving the worker

    def execute(self) -> None:
        try:
            self._ready()
            for index in range(len(self.plan.trials)):
                self.stage = f"correctness trial {index}"
                self._trial(index)
            self.stage = "timing"
            self._timing()
            self.stage = "finish"
            done = self._recv("done")
            self.worker.snapshot_descendants()  # the worker waits for "exit", so its children are still its own
            self.worker.channel.send({"kind": "exit"})
            self._check_replaced(done.header)
            self.launches = _int_dict(done.header.get("launches"))
            self.target_compiles = _target_compiles(done.header.get("target_compiles"))
            failed = [c for c in self.target_compiles if not c.ok]
            if failed:
                raise _Verdict(
                    EvalStatus.COMPILE_ERROR,
                    f"Triton kernel {failed[0].kernel} runs in the interpreter but does not compile for "
                    f"{failed[0].target}: {failed[0].error}",
                )
        except _Verdict as verdict:
            self.status, self.reasons = verdict.status, [verdict.reason, *self.reasons]
        except ChannelTimeout:
            self.status = EvalStatus.TIMEOUT
            self.reasons = [f"timed out after {self.config.timeout_s:g} s (during {self.stage})"]
        except ChannelClosed:
            self.status, reason = self._died()
            self.reasons = [reason]
        except ChannelError as exc:
            self.status = EvalStatus.REJECTED
            self.reasons = [f"the worker's report channel was tampered with during {self.stage}: {exc}"]
        info = self.worker.finish(kill=self.status is not EvalStatus.CORRECT)
        if info.survivors:
            listed = "; ".join(info.survivors[:3])
            reason = f"left {len(info.survivors)} process(es) running after the evaluation ({listed}); they were killed"
            if self.status is EvalStatus.CORRECT:
                self.status = EvalStatus.REJECTED
                self.reasons.insert(0, reason)
            else:
                self.warnings.append(reason)
        if self.status is EvalStatus.CORRECT:
            self._gates()

    def _died(self) -> tuple[EvalStatus, str]:
        info = self.worker.finish(grace_s=2.0)
        if info.signal_name:
            return (
                EvalStatus.RUNTIME_ERROR,
                f"the worker crashed with signal {info.signal_name} during {self.stage}",
            )
        return (
            EvalStatus.RUNTIME_ERROR,
            f"the worker exited (code {info.returncode}) before its report was complete, during {self.stage}",
        )

    def _recv(self, kind: str) -> Frame:
        frame = self.worker.channel.recv(self.deadline)
        if frame.kind == "error":
            raise _Verdict(*_classify_error(frame.header))
        if frame.kind != kind:
            raise ChannelError(f"expected a {kind!r} frame, got {frame.kind!r}")
        return frame

    def _ready(self) -> None:
        frame = self._recv("ready")
        self.device_label = str(frame.header.get("device", ""))
        self._check_replaced(frame.header)

    def _trial(self, index: int) -> None:
        trial = self.plan.trials[index]
        self.worker.channel.send({"kind": "trial", "index": index, **trial})
        frame = self._recv("trial_output")
        header = frame.header
        self._check_replaced(header)
        if header.get("input_modified"):
            raise _Verdict(EvalStatus.REJECTED, f"the candidate modified its input tensors in place (trial {index})")
        if header.get("late_write"):
            raise _Verdict(
                EvalStatus.REJECTED,
                "the output changed after forward() returned: work ran on a side stream or a background thread",
            )
        if index == 0:
            self._check_custom_work(header)
        if not header.get("weights_shared") and index == 0 and self.ref.has_weights:
            self.warnings.append(
                "ModelNew's parameters do not match Model's names and shapes: weights were seeded the KernelBench "
                "way, not copied"
            )
        expected_structure, expected = self.ref.expected[index]
        check = self._compare(frame, expected_structure, expected, index, f"trial {index}")
        self.trials.append(check)
        if not check.passed:
            raise _Verdict(EvalStatus.INCORRECT, check.reason or "output mismatch")

    def _check_custom_work(self, header: dict[str, Any]) -> None:
        ops = [str(op) for op in header.get("aten_ops") or []]
        self.aten_ops = ops
        launched = int(header.get("launches_in_call") or 0)
        if launched == 0:
            kind = "Triton kernel launch" if self.config.backend == "triton" else "call into a load_inline module"
            raise _Verdict(EvalStatus.REJECTED, f"no custom kernel ran during forward() (no {kind} was seen)")
        from openkernel.evaluate.harness import compute_ops

        ref_compute = compute_ops(set(self.ref.aten_ops))
        used = ref_compute & set(ops)
        if ref_compute and used == ref_compute:
            names = ", ".join(sorted(used))
            raise _Verdict(
                EvalStatus.REJECTED,
                f"the candidate calls the reference's compute op(s) itself ({names}): its kernels do none of the work",
            )
        if used:
            self.warnings.append(f"also calls the reference's op(s) {', '.join(sorted(used))} (partial replacement)")

    def _compare(
        self, frame: Frame, structure: str, expected: list[torch.Tensor], index: int, label: str
    ) -> TrialCheck:
        header = frame.header
        got = header.get("outputs") or []
        if header.get("structure") != structure or len(got) != len(expected):
            want = "a plain tensor" if structure == "tensor" else f"a tuple of {len(expected)} tensors"
            kinds = ", ".join(str(o.get("type")) for o in got) if isinstance(got, list) else "?"
            return _failed(index, f"{label}: forward() returned {header.get('structure')} ({kinds}); expected {want}")
        if not header.get("sendable"):
            kinds = ", ".join(str(o.get("type")) for o in got)
            return _failed(index, f"{label}: output must be a plain torch.Tensor, got {kinds}")
        for meta in got:
            if meta.get("type") != "torch.Tensor":
                return _failed(index, f"{label}: output must be a plain torch.Tensor, got {meta.get('type')}")
            want_device = "cuda" if self.plan.device.startswith("cuda") else "cpu"
            if not str(meta.get("device", "")).startswith(want_device):
                return _failed(index, f"{label}: output is on {meta.get('device')}, expected {want_device}")
        actual = decode_tensors(header.get("tensors"), frame.payload)
        worst = TrialCheck(index, True, None, 0.0, 0.0, 0)
        for k, (e, a) in enumerate(zip(expected, actual, strict=True)):
            tol = self._tolerance(e)
            res = check_output(e, a, tol, label if len(expected) == 1 else f"{label} output {k}")
            if not res.passed:
                return TrialCheck(index, False, res.reason, res.max_abs_error, res.max_rel_error, res.mismatched)
            worst = TrialCheck(
                index,
                True,
                None,
                max(worst.max_abs_error or 0.0, res.max_abs_error or 0.0),
                max(worst.max_rel_error or 0.0, res.max_rel_error or 0.0),
                0,
            )
        return worst

    def _tolerance(self, expected: torch.Tensor) -> Tolerance:
        return tolerance_for(expected.dtype, self.ref.atol, self.ref.rtol)

    def _check_replaced(self, header: dict[str, Any]) -> None:
        replaced = header.get("replaced") or []
        if replaced:
            names = ", ".join(str(r) for r in replaced[:6])
            raise _Verdict(EvalStatus.REJECTED, f"the candidate replaced harness functions: {names}")

    def _timing(self) -> None:
        ch = self.worker.channel
        checked = set(self.plan.checked)
        for i, (pool, noise_seed) in enumerate(self.plan.schedule):
            ch.send({"kind": "sample", "index": i, "pool": pool, "noise_seed": noise_seed})
            frame = self._recv("sample_done")
            self._check_replaced(frame.header)
            if frame.header.get("input_modified"):
                raise _Verdict(
                    EvalStatus.REJECTED, f"the candidate modified its input tensors in place (timed call {i})"
                )
            keep = i in checked
            ch.send({"kind": "keep", "keep": keep})
            if i >= self.plan.warmup:
                self.samples.append(
                    {
                        "event_ms": _num(frame.header.get("event_ms")),
                        "synced_ms": _num(frame.header.get("synced_ms")),
                        "wall_ms": _num(frame.header.get("wall_ms")),
                    }
                )
            if keep:
                out = self._recv("sample_output")
                structure, expected = self.ref.checked[i]
                check = self._compare(out, structure, expected, -1 - len(self.trials), f"timed call {i}")
                self.trials.append(check)
                if not check.passed:
                    raise _Verdict(EvalStatus.INCORRECT, check.reason or "timed output mismatch")
        self._parent_clock()
        ch.send({"kind": "finish"})

    def _parent_clock(self) -> None:
        """Time batches of back-to-back calls with the parent's own clock (the worker's can be forged).

        A batch keeps the GPU queue full, so per call it costs the kernel's time plus whatever
        launch overhead the GPU cannot hide; round trips with no work are subtracted.
        """
        ch = self.worker.channel
        for _ in range(5):
            t0 = time.perf_counter()
            ch.send({"kind": "ping"})
            self._recv("pong")
            self.ping_ms.append((time.perf_counter() - t0) * 1e3)
        reported = statistics.median(s["event_ms"] for s in self.samples) if self.samples else 1.0
        calls = max(3, min(100, math.ceil(_BATCH_TARGET_MS / max(reported, 1e-3))))
        ping = statistics.median(self.ping_ms)
        for _ in range(3):
            t0 = time.perf_counter()
            ch.send({"kind": "batch", "calls": calls})
            self._recv("batch_done")
            self.batch_ms_per_call.append(((time.perf_counter() - t0) * 1e3 - ping) / calls)

    # -- gates on the numbers

    def _gates(self) -> None:
        if not self.samples:
            return
        self.timing = _stats(self.samples, "cuda_events" if self.plan.device.startswith("cuda") else "wall_clock")
        med = self.timing.median_ms
        gaps = [s["synced_ms"] - s["event_ms"] for s in self.samples if not math.isnan(s["synced_ms"])]
        if gaps and self.timing.synced_median_ms is not None:
            # The smallest gap: work left on another stream shows in every call, contention does not.
            gap = min(gaps)
            if gap > max(_SIDE_STREAM_SLACK_MS, _SIDE_STREAM_FRACTION * med):
                self.status = EvalStatus.REJECTED
                self.reasons.insert(
                    0,
                    f"work finished outside the timed stream: {med:.4f} ms on the harness stream but "
                    f"{self.timing.synced_median_ms:.4f} ms to a device-wide sync (side stream or background work)",
                )
                return
        if self.ref.timing is not None:
            ref_stats = _stats(_ref_samples(self.ref.timing), str(self.ref.timing.get("method")))
            if med > 0:
                self.speedup = ref_stats.median_ms / med
        if self.plan.device.startswith("cuda"):
            spec = find_spec(self.device_label)
            if spec is not None and self.ref.input_bytes:
                floor_ms = 0.8 * self.ref.input_bytes / spec.hbm_bytes_per_s * 1e3
                if med < floor_ms:
                    self.status = EvalStatus.REJECTED
                    self.reasons.insert(
                        0,
                        f"faster than physics: {med:.4f} ms is below the memory floor {floor_ms:.4f} ms for reading "
                        f"the inputs at {spec.name}'s peak bandwidth",
                    )
        # The parent's clock bounds what the worker may claim (its own clock could be patched).
        if self.batch_ms_per_call:
            host_ms = min(self.batch_ms_per_call)
            if med < 0.5 * host_ms - _WALL_SLACK_MS:
                self.status = EvalStatus.REJECTED
                self.reasons.insert(
                    0,
                    f"reported time {med:.4f} ms disagrees with the parent's wall clock ({host_ms:.4f} ms per call): "
                    "the timer was tampered with",
                )

    # -- the result

    def result(self, second: _CandidateRun | None) -> EvalResult:
        problem, candidate, config = self.ctx.problem, self.ctx.candidate, self.ctx.config
        plan, ref, started = self.ctx.plan, self.ref, self.ctx.started
        on_gpu = plan.device.startswith("cuda")
        status, reasons, warnings = self.status, list(self.reasons), list(self.warnings)
        if ref.degenerate:
            warnings.append(
                f"weak problem: {' and '.join(ref.degenerate)} would pass its check; make get_inputs() give real spread"
            )
        timing = self.timing
        ref_stats = _stats(_ref_samples(ref.timing), str(ref.timing.get("method"))) if ref.timing else None
        speedup = self.speedup
        if second is not None:
            if second.status is not EvalStatus.CORRECT:
                status, reasons = (
                    second.status,
                    [f"re-measurement in a fresh process: {r}" for r in second.reasons],
                )
            elif second.timing is not None and timing is not None:
                warnings.append(
                    f"speedup above {config.remeasure_above:g}x: measured again in a fresh process "
                    f"({timing.median_ms:.4f} ms then {second.timing.median_ms:.4f} ms); the second figure is reported"
                )
                timing = second.timing
                speedup = second.speedup
        comp = ref.compile_timing
        comp_ms = None
        if comp and comp.get("ok"):
            comp_ms = _stats(_ref_samples(comp), str(comp.get("method"))).median_ms
        elif comp:
            warnings.append(f"torch.compile baseline failed: {comp.get('error')}")
        timing_valid = on_gpu and status is EvalStatus.CORRECT
        note = None
        if not on_gpu:
            note = "no GPU: timings are CPU wall-clock times of the Triton interpreter and say nothing about GPU speed"
        elif status is not EvalStatus.CORRECT:
            note = "the candidate did not pass, so its time is not a result"
        correct = status is EvalStatus.CORRECT
        return EvalResult(
            status=status,
            reasons=tuple(reasons) if reasons else (("all checks passed",) if correct else ()),
            problem=problem.name,
            candidate=str(candidate),
            backend=config.backend,
            device=self.device_label or ref.device_label or plan.device,
            size=plan.size + "".join(f" {k}={v}" for k, v in config.size_overrides),
            timing_valid=timing_valid,
            timing_note=note,
            runtime_ms=timing.median_ms if timing and correct else None,
            reference_runtime_ms=ref_stats.median_ms if ref_stats else None,
            speedup=speedup if correct else None,
            compile_baseline_runtime_ms=comp_ms,
            candidate_timing=timing if correct else None,
            reference_timing=ref_stats,
            trials=tuple(self.trials),
            kernels_launched=tuple(KernelLaunchCount(k, v) for k, v in sorted(self.launches.items())),
            candidate_aten_ops=tuple(self.aten_ops),
            target_compiles=tuple(self.target_compiles),
            warnings=tuple(warnings),
            wall_seconds=round(time.monotonic() - started, 3),
            log_tail=self.worker.log.text(),
        )


def _failed(index: int, reason: str) -> TrialCheck:
    return TrialCheck(index, False, reason, None, None, None)


def _classify_error(header: dict[str, Any]) -> tuple[EvalStatus, str]:
    stage = str(header.get("stage", "?"))
    etype = str(header.get("error_type", "Error"))
    message = str(header.get("message", "")).strip().splitlines()
    first = message[0] if message else ""
    if etype == "NoModelNew":
        return EvalStatus.COMPILE_ERROR, first
    if etype in ("CompiledNotRun", "CompileCheckUnavailable"):
        return EvalStatus.COMPILED, first
    if etype == "CudaBuildError":
        return EvalStatus.COMPILE_ERROR, f"the CUDA extension failed to build: {first}"
    if stage == "import":
        if etype in ("SyntaxError", "IndentationError", "TabError"):
            return EvalStatus.COMPILE_ERROR, f"syntax error in the candidate: {first}"
        return EvalStatus.COMPILE_ERROR, f"importing the candidate failed: {etype}: {first}"
    if header.get("in_triton") and _is_triton_compile_error(etype, first):
        return EvalStatus.COMPILE_ERROR, f"a Triton kernel failed to compile: {etype}: {first}"
    return EvalStatus.RUNTIME_ERROR, f"{etype} in {stage}: {first}"


_COMPILE_KINDS = (
    "NameError",
    "UnboundLocalError",
    "AttributeError",
    "CompilationError",
    "UnsupportedLanguageConstruct",
)


def _is_triton_compile_error(etype: str, message: str) -> bool:
    """Errors a GPU build would raise at compile time (the interpreter wraps them in InterpreterError)."""
    if "CompilationError" in etype or etype in _COMPILE_KINDS:
        return True
    return etype == "InterpreterError" and message.startswith(_COMPILE_KINDS)


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else float("nan")


def _target_compiles(value: Any) -> list[TargetCompile]:
    """Validate the worker's compile-check reports (they come from the untrusted process)."""
    out: list[TargetCompile] = []
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        out.append(
            TargetCompile(
                kernel=str(item.get("kernel_name", "?")),
                target=str(item.get("target", "?")),
                ok=item.get("ok") is True,
                error=str(item["error"]) if item.get("error") is not None else None,
                registers_per_thread=_opt_int(item.get("registers_per_thread")),
                spill_store_bytes=_opt_int(item.get("spill_store_bytes")),
                shared_bytes=_opt_int(item.get("shared_bytes")),
            )
        )
    return out


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _int_dict(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int)}


def _ref_samples(timing: dict[str, Any]) -> list[dict[str, float]]:
    event = timing.get("event_ms") or []
    synced = timing.get("synced_ms") or [float("nan")] * len(event)
    wall = timing.get("wall_ms") or [float("nan")] * len(event)
    return [
        {"event_ms": _num(e), "synced_ms": _num(s), "wall_ms": _num(w)}
        for e, s, w in zip(event, synced, wall, strict=False)
    ]


def _stats(samples: list[dict[str, float]], method: str) -> TimingStats:
    values = sorted(s["event_ms"] for s in samples)
    synced = [s["synced_ms"] for s in samples if s["synced_ms"] == s["synced_ms"]]
    wall = [s["wall_ms"] for s in samples if s["wall_ms"] == s["wall_ms"]]
    n = len(values)

    def pct(p: float) -> float:
        return values[min(n - 1, max(0, round(p * (n - 1))))]

    return TimingStats(
        method=method,
        samples=n,
        median_ms=statistics.median(values),
        mean_ms=statistics.fmean(values),
        min_ms=values[0],
        max_ms=values[-1],
        p10_ms=pct(0.10),
        p90_ms=pct(0.90),
        stdev_ms=statistics.stdev(values) if n > 1 else 0.0,
        synced_median_ms=statistics.median(synced) if synced and method == "cuda_events" else None,
        wall_median_ms=statistics.median(wall) if wall else None,
    )
