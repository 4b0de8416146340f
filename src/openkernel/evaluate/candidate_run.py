"""Driving the candidate worker: trials, timed calls, the parent's own clock, and the integrity gates.

One :class:`CandidateRun` per candidate process. It stops at the first decisive finding (a
:class:`Verdict`), and turns everything it saw into the :class:`EvalResult`.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from openkernel.evaluate.channel import ChannelClosed, ChannelError, ChannelTimeout, Frame, decode_tensors
from openkernel.evaluate.compare import Tolerance, check_output, tolerance_for
from openkernel.evaluate.harness import compute_ops
from openkernel.evaluate.plan import Context, Reference, Verdict
from openkernel.evaluate.process import WorkerProcess
from openkernel.evaluate.reading import (
    classify_error,
    failed_check,
    int_dict,
    num,
    target_compiles,
    timing_samples,
    timing_stats,
)
from openkernel.hardware import calibration_for, ceilings, find_spec, load_calibration, spec_by_name
from openkernel.profile import Roofline, analyse
from openkernel.types import EvalResult, EvalStatus, KernelLaunchCount, TargetCompile, TimingStats, TrialCheck

__all__ = ["CandidateRun"]

_SIDE_STREAM_SLACK_MS = 0.05  # sync latency allowed between the stream end event and the synced one
_SIDE_STREAM_FRACTION = 0.25
_SIDE_MEDIAN_SLACK_MS = 0.1  # the same for the median call's gap (honest on the H200: up to 0.06 ms)
_SIDE_MEDIAN_FRACTION = 0.1
_PROBE_SLACK_MS = 0.02  # the output probe's wait after the end event (honest on the H200: see BENCHMARKS.md)
_PROBE_FRACTION = 0.1
_LATE_FRACTION = 0.1  # above this share of late timed calls, a timing says it includes host time
_WALL_SLACK_MS = 1.0  # host-side noise allowed when checking reported times against the parent's clock
_BATCH_TARGET_MS = 20.0  # a parent-timed batch lasts about this long


class CandidateRun:
    """``before_timing`` runs between the trials and the timed calls (the parent takes the GPU for
    itself there, and times the reference); it returns its own phases, and its time counts neither
    as the candidate's nor against the candidate's timeout. ``after_timing`` runs right after the
    timed calls (the parent lets the GPU go); then ``expected`` fetches the reference's outputs of the
    checked timed calls, and the candidate's are fetched and compared, with no GPU lock held."""

    def __init__(
        self,
        worker: WorkerProcess,
        ref: Reference,
        ctx: Context,
        started: float,
        before_timing: Callable[[], dict[str, float]] | None = None,
        after_timing: Callable[[], None] | None = None,
        expected: Callable[[], None] | None = None,
    ) -> None:
        self.worker = worker
        self.before_timing = before_timing
        self.after_timing = after_timing
        self.expected = expected
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
        self.phase_seconds: dict[str, float] = {}  # where this run's time went, in order
        self._phase_start = started

    def _mark(self, phase: str) -> None:
        """Close ``phase`` (the time since the last mark) and start the next."""
        now = time.monotonic()
        self.phase_seconds[phase] = round(now - self._phase_start, 3)
        self._phase_start = now

    # -- driving the worker

    def execute(self) -> None:
        phase = "candidate import"
        try:
            self._ready()
            self._mark(phase)
            phase = "correctness trials"
            for index in range(len(self.plan.trials)):
                self.stage = f"correctness trial {index}"
                self._trial(index)
            self._mark(phase)
            if self.before_timing is not None:
                self.phase_seconds.update(self.before_timing())
                self.deadline += time.monotonic() - self._phase_start
                self._phase_start = time.monotonic()
            phase = "timed calls"
            self.stage = "timing"
            self._timing()
            if self.after_timing is not None:
                self.after_timing()
            self._mark(phase)
            phase = "checked outputs"
            self.stage = "checking the timed calls' outputs"
            self._check_kept()
            self._mark(phase)
            phase = "gates and cleanup"
            self.stage = "finish"
            self.worker.channel.send({"kind": "finish"})
            done = self._recv("done")
            self.worker.snapshot_descendants()  # the worker waits for "exit", so its children are still its own
            self.worker.channel.send({"kind": "exit"})
            self._check_replaced(done.header)
            self.launches = int_dict(done.header.get("launches"))
            self.target_compiles = target_compiles(done.header.get("target_compiles"))
            failed = [c for c in self.target_compiles if not c.ok]
            if failed:
                raise Verdict(
                    EvalStatus.COMPILE_ERROR,
                    f"Triton kernel {failed[0].kernel} runs in the interpreter but does not compile for "
                    f"{failed[0].target}: {failed[0].error}",
                )
        except Verdict as verdict:
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
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            # An authenticated frame whose content is not what the harness sends: forged in-process.
            self.status = EvalStatus.REJECTED
            self.reasons = [f"the worker sent a malformed report during {self.stage}: {type(exc).__name__}: {exc}"]
        if phase != "gates and cleanup":  # stopped early: the phase it stopped in ends here
            self._mark(phase)
            phase = "gates and cleanup"
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
        self._mark(phase)

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
            raise Verdict(*classify_error(frame.header))
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
            raise Verdict(EvalStatus.REJECTED, f"the candidate modified its input tensors in place (trial {index})")
        if header.get("late_write"):
            raise Verdict(
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
            raise Verdict(EvalStatus.INCORRECT, check.reason or "output mismatch")

    def _check_custom_work(self, header: dict[str, Any]) -> None:
        ops = [str(op) for op in header.get("aten_ops") or []]
        self.aten_ops = ops
        launched = int(header.get("launches_in_call") or 0)
        if launched == 0:
            kind = "Triton kernel launch" if self.config.backend == "triton" else "call into a load_inline module"
            raise Verdict(EvalStatus.REJECTED, f"no custom kernel ran during forward() (no {kind} was seen)")
        ref_compute = compute_ops(set(self.ref.aten_ops))
        used = ref_compute & set(ops)
        if ref_compute and used == ref_compute:
            names = ", ".join(sorted(used))
            raise Verdict(
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
            return failed_check(
                index, f"{label}: forward() returned {header.get('structure')} ({kinds}); expected {want}"
            )
        if not header.get("sendable"):
            kinds = ", ".join(str(o.get("type")) for o in got)
            return failed_check(index, f"{label}: output must be a plain torch.Tensor, got {kinds}")
        for meta in got:
            if meta.get("type") != "torch.Tensor":
                return failed_check(index, f"{label}: output must be a plain torch.Tensor, got {meta.get('type')}")
            want_device = "cuda" if self.plan.device.startswith("cuda") else "cpu"
            if not str(meta.get("device", "")).startswith(want_device):
                return failed_check(index, f"{label}: output is on {meta.get('device')}, expected {want_device}")
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
            raise Verdict(EvalStatus.REJECTED, f"the candidate replaced harness functions: {names}")

    def _timing(self) -> None:
        ch = self.worker.channel
        checked = set(self.plan.checked)
        for i, (pool, noise_seed) in enumerate(self.plan.schedule):
            ch.send({"kind": "sample", "index": i, "pool": pool, "noise_seed": noise_seed})
            frame = self._recv("sample_done")
            self._check_replaced(frame.header)
            if frame.header.get("input_modified"):
                raise Verdict(
                    EvalStatus.REJECTED, f"the candidate modified its input tensors in place (timed call {i})"
                )
            if frame.header.get("outputs_plain") is False:
                raise Verdict(
                    EvalStatus.INCORRECT, f"timed call {i}: output must be a plain torch.Tensor, got a tensor subclass"
                )
            if frame.header.get("written_late") is True:
                raise Verdict(
                    EvalStatus.REJECTED,
                    f"the output of timed call {i} changed after the call's end on the harness stream (elements read "
                    "right after it differed after a device-wide sync): work ran on a side stream or a background "
                    "thread",
                )
            keep = i in checked
            ch.send({"kind": "keep", "keep": keep})
            if i >= self.plan.warmup:
                keys = ("event_ms", "synced_ms", "wall_ms", "sync_ms", "probe_ms", "probe_idle_ms")
                sample = {key: num(frame.header.get(key)) for key in keys}
                sample["late"] = 1.0 if frame.header.get("late") is True else 0.0
                sample["probe_queued"] = 1.0 if frame.header.get("probe_queued") is True else 0.0
                if not (math.isfinite(sample["event_ms"]) and sample["event_ms"] > 0):
                    raise ChannelError(f"implausible time {frame.header.get('event_ms')!r} for timed call {i}")
                self.samples.append(sample)
        if self.plan.device.startswith("cuda"):
            self._parent_clock()  # what it checks only means something for GPU timings

    def _check_kept(self) -> None:
        """Compare the checked timed calls' outputs (copied by the worker right after each call).

        Runs once every timed call is done, so the worker holds one output per checked call, in order.
        """
        kept = sorted(self.plan.checked)
        if not kept:
            return
        if self.expected is not None:
            start = time.monotonic()
            self.expected()
            self.deadline += time.monotonic() - start  # the reference's transfer is not the candidate's time
        self.worker.channel.send({"kind": "outputs"})
        for i in kept:
            out = self._recv("sample_output")
            if out.header.get("index") != i:
                raise ChannelError(f"output of timed call {out.header.get('index')!r} sent for timed call {i}")
            structure, expected = self.ref.checked[i]
            check = self._compare(out, structure, expected, -1 - len(self.trials), f"timed call {i}")
            self.trials.append(check)
            if not check.passed:
                raise Verdict(EvalStatus.INCORRECT, check.reason or "timed output mismatch")

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
        self.timing = timing_stats(self.samples, "cuda_events" if self.plan.device.startswith("cuda") else "wall_clock")
        med = self.timing.median_ms
        outside = self._outside_work(med)
        if outside is not None:
            self.status = EvalStatus.REJECTED
            self.reasons.insert(0, outside)
            return
        if self.ref.timing is not None:
            ref_stats = timing_stats(timing_samples(self.ref.timing), str(self.ref.timing.get("method")))
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
        # The parent's clock bounds what the worker may claim (its own clock could be patched). Only on a
        # GPU: CPU timings are marked invalid anyway, and a loaded CPU would make this gate cry wolf.
        if self.batch_ms_per_call and self.plan.device.startswith("cuda"):
            host_ms = min(self.batch_ms_per_call)
            if med < 0.5 * host_ms - _WALL_SLACK_MS:
                self.status = EvalStatus.REJECTED
                self.reasons.insert(
                    0,
                    f"reported time {med:.4f} ms disagrees with the parent's wall clock ({host_ms:.4f} ms per call): "
                    "the timer was tampered with",
                )

    def _outside_work(self, med: float) -> str | None:
        """Why the timed calls' work did not all finish on the harness stream, or None.

        Three figures (:mod:`openkernel.evaluate.reading`), each against a slack that honest kernels
        measured on the H200 stay under (BENCHMARKS.md): the smallest gap to a device-wide sync,
        the median call's gap, both less the host's round trip, and the median call's wait of the
        output probe (its GPU time after the end event less its time with nothing else pending).
        """
        timing = self.timing
        if timing is None or timing.synced_median_ms is None:
            return None
        synced = f"{med:.4f} ms on the harness stream but {timing.synced_median_ms:.4f} ms to a device-wide sync"
        gap = timing.side_work_ms
        if gap is not None and gap > max(_SIDE_STREAM_SLACK_MS, _SIDE_STREAM_FRACTION * med):
            return f"work finished outside the timed stream: {synced} (side stream or background work)"
        per_call = timing.side_median_ms
        if per_call is not None and per_call > max(_SIDE_MEDIAN_SLACK_MS, _SIDE_MEDIAN_FRACTION * med):
            return (
                f"work finished outside the timed stream in most timed calls: the median call waited {per_call:.4f} ms "
                f"for a device-wide sync beyond the host's round trip ({synced}; side stream or background work)"
            )
        wait = timing.probe_wait_ms
        if wait is not None and wait > max(_PROBE_SLACK_MS, _PROBE_FRACTION * med):
            return (
                f"work held the GPU after the timed stream's end: the harness's output probe waited {wait:.4f} ms "
                f"(median call) beyond its own time, after a call timed at {med:.4f} ms (side stream)"
            )
        return None

    # -- the result

    def _roofline(self, measured_ms: float | None, warnings: list[str]) -> Roofline | None:
        """The problem on the roofline of the GPU it ran on (or of the chosen target without one)."""
        if self.ref.work is None:
            if self.ref.work_error:
                warnings.append(f"no roofline: counting the reference's work failed ({self.ref.work_error})")
            return None
        cache = self.config.cache_dir
        if self.plan.device.startswith("cuda") and self.config.hardware is None:
            spec = find_spec(self.device_label)
            if spec is None:
                warnings.append(f"no roofline: {self.device_label} is not in the hardware table")
                return None
            calibration = load_calibration(self.device_label, cache)
        else:
            spec = spec_by_name(self.config.hardware or "H200")
            calibration = calibration_for(spec, cache)
            if self.plan.device.startswith("cuda"):
                measured_ms = None  # measured on another GPU than the target: only the analytic part
        work = self.ref.work
        return analyse(work.flop_count, work.min_bytes, None, ceilings(spec, calibration), measured_ms)

    def result(self, second: CandidateRun | None) -> EvalResult:
        problem, candidate, config = self.ctx.problem, self.ctx.candidate, self.ctx.config
        plan, ref, started = self.ctx.plan, self.ref, self.ctx.started
        on_gpu = plan.device.startswith("cuda")
        status, reasons, warnings = self.status, list(self.reasons), list(self.warnings)
        if ref.degenerate:
            warnings.append(
                f"weak problem: {' and '.join(ref.degenerate)} would pass its check; make get_inputs() give real spread"
            )
        timing = self.timing
        ref_stats = timing_stats(timing_samples(ref.timing), str(ref.timing.get("method"))) if ref.timing else None
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
            comp_ms = timing_stats(timing_samples(comp), str(comp.get("method"))).median_ms
        elif comp:
            warnings.append(f"torch.compile baseline failed: {comp.get('error')}")
        for label, stats in (("the candidate", timing), ("the baseline", ref_stats)):
            if on_gpu and stats is not None and stats.late_samples > _LATE_FRACTION * stats.samples:
                warnings.append(
                    f"host-bound: in {stats.late_samples} of {stats.samples} timed calls of {label} the GPU was "
                    "idle before the host had queued the call (over ~1 ms of Python and launch work per call, "
                    "or a busy CPU); those times include host time"
                )
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
            profile=self._roofline(timing.median_ms if timing and correct and on_gpu else None, warnings),
            warnings=tuple(warnings),
            wall_seconds=round(time.monotonic() - started, 3),
            log_tail=self.worker.log.text(),
            phase_seconds={
                **self.ctx.phase_seconds,
                **self.phase_seconds,
                **{f"re-measure: {k}": v for k, v in (second.phase_seconds if second else {}).items()},
            },
        )
