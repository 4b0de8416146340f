"""Deep profile: a candidate's kernels under Nsight Compute, and the analytic roofline when ncu can't run.

``deep_profile`` runs ``ncu ... python -m openkernel.profile.ncu_driver`` the way the evaluator runs
a worker: its own session and process group, a private home and temp directory, an allow-listed
environment (``worker_environment``), a hard timeout after which the whole group is killed, and a
bounded log. A missing ncu, no GPU, or counters the user may not read give ``available=False`` and a
one-line message that says how to fix it; nothing here raises for those. ``analytic_profile`` is the
part that needs no GPU: the reference's FLOPs and minimal bytes against a GPU's ceilings.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openkernel.errors import BadProblem, CandidateNotFound, ConfigError
from openkernel.evaluate.config import default_cache_dir
from openkernel.evaluate.process import MARKER_VAR, BoundedLog, drain_into, kill_tree, worker_environment
from openkernel.profile.ncu import (
    KernelProfile,
    attach_source,
    build_command,
    default_gpu_check,
    diagnose,
    error_lines,
    metric_names,
    ncu_available,
    parse_raw_csv,
    parse_source_csv,
    source_command,
    unknown_metrics,
)
from openkernel.profile.roofline import Roofline
from openkernel.types import Problem

__all__ = ["AnalyticProfile", "DeepProfileConfig", "DeepProfileResult", "analytic_profile", "deep_profile"]

_IMPORT_TIMEOUT_S = 300.0  # printing a saved report's source page


@dataclass(frozen=True)
class DeepProfileConfig:
    size: str = "auto"  # "full", "small", or "auto" (full: a deep profile runs on a GPU)
    size_overrides: tuple[tuple[str, int | float], ...] = ()  # module constants set after the size
    kernel_regex: str | None = None  # only kernels whose function name matches (ncu's regex: filter)
    launch_count: int = 20  # kernel launches ncu profiles at most
    calls: int = 1  # forward calls between the profiler markers
    warmup_calls: int = 2
    source_counters: bool = False  # also the per-source-line counters (a second, GPU-free ncu run)
    report_path: Path | None = None  # keep the .ncu-rep here (for ncu-ui); None: a temporary one
    timeout_s: float = 600.0  # the whole ncu run, replays included
    build_timeout_s: float = 240.0  # a CUDA candidate's load_inline build
    ncu_path: str | None = None  # None: ncu on PATH or in /opt/nvidia/nsight-compute
    cache_dir: Path = field(default_factory=default_cache_dir)

    def __post_init__(self) -> None:
        if self.size not in ("auto", "full", "small"):
            raise ConfigError(f"unknown size {self.size!r}: use auto, full or small")
        if self.launch_count < 1:
            raise ConfigError("--launches must be at least 1")
        if self.calls < 1 or self.warmup_calls < 0:
            raise ConfigError("at least one profiled call is needed, and warm-up calls cannot be negative")
        if not self.timeout_s > 0:
            raise ConfigError(f"the timeout must be a positive number of seconds, not {self.timeout_s}")


@dataclass(frozen=True)
class DeepProfileResult:
    available: bool  # ncu and a GPU were usable
    message: str  # one line: what was profiled, or what went wrong and how to fix it
    kernels: tuple[KernelProfile, ...]
    command: tuple[str, ...]  # the ncu command that ran; empty when none did
    wall_seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "available": self.available,
            "message": self.message,
            "kernels": [k.to_json() for k in self.kernels],
            "command": list(self.command),
            "wall_seconds": self.wall_seconds,
        }


def problem_sizes(
    problem: Problem, size: str, overrides: Sequence[tuple[str, int | float]], on_gpu: bool
) -> tuple[str, list[tuple[str, int | float]]]:
    """The size's name and the constants to set: the evaluator's rule (auto is small only off a GPU)."""
    chosen = size if size != "auto" else ("full" if on_gpu or not problem.has_small_size else "small")
    if chosen == "small" and not problem.has_small_size:
        chosen = "full"
    sizes = [*(problem.small_sizes if chosen == "small" else ()), *overrides]
    return chosen + "".join(f" {k}={v}" for k, v in overrides), sizes


# ------------------------------------------------------------------------------------- running ncu


@dataclass(frozen=True)
class _Run:
    returncode: int | None  # None: killed at the timeout
    output: str  # stdout and stderr, bounded (the driver's and the candidate's prints)
    tool_output: str  # what ncu wrote to its --log-file: the CSV and its ==PROF== / ==ERROR== lines


def _run_isolated(cmd: list[str], private: Path, cache_dir: Path, log_path: Path, timeout_s: float) -> _Run:
    """Run ``cmd`` as the evaluator runs a worker, and leave nothing behind."""
    log_path.unlink(missing_ok=True)  # ncu overwrites it, but a run that dies first must not leave an old one
    marker = secrets.token_hex(16)
    env = worker_environment(dict(os.environ), private, cache_dir, {MARKER_VAR: marker})
    log = BoundedLog()
    proc = subprocess.Popen(
        cmd,
        cwd=private,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own session and process group: killable as a whole
    )

    reader = drain_into(proc, log, "ncu-log")
    returncode: int | None
    try:
        returncode = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        returncode = None
    kill_tree(proc, marker)
    reader.join(timeout=2)
    if proc.stdout is not None:
        proc.stdout.close()
    tool_output = log_path.read_text(encoding="utf-8", errors="replace") if log_path.is_file() else ""
    return _Run(returncode, log.text(), tool_output)


def _driver(
    problem: Problem, candidate: Path, sizes: list[tuple[str, int | float]], config: DeepProfileConfig
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "openkernel.profile.ncu_driver",
        "--problem",
        str(problem.path),
        "--candidate",
        str(candidate.resolve()),
        "--sizes",
        json.dumps(sizes),
        "--warmup",
        str(config.warmup_calls),
        "--calls",
        str(config.calls),
        "--cache-dir",
        str(config.cache_dir.resolve()),
        "--build-timeout",
        str(config.build_timeout_s),
    ]


def _why_empty(run: _Run, timeout_s: float) -> str:
    """One line on why a run produced no kernel rows."""
    if run.returncode is None:
        return f"ncu did not finish within {timeout_s:g} s: profile fewer launches (--launches) or raise the timeout"
    driver = [line for line in run.output.splitlines() if "openkernel.profile.ncu_driver: error:" in line]
    if driver:
        return f"the profiled run failed: {driver[-1].split('error:', 1)[1].strip()}"
    errors = error_lines(run.tool_output) + error_lines(run.output)
    if errors:
        return f"ncu failed: {errors[0]}"
    if "No kernels were profiled" in run.tool_output + run.output:
        return "ncu profiled no kernels: the candidate launched none, or --kernels matched none"
    return f"ncu printed no kernel table (exit code {run.returncode}): run the command by hand to see why"


def deep_profile(
    problem: Problem,
    candidate: Path,
    config: DeepProfileConfig,
    gpu_check: Callable[[], str | None] = default_gpu_check,
) -> DeepProfileResult:
    """Profile the candidate's kernels with ncu; ``available=False`` with the reason when it can't run.

    ``gpu_check`` returns None when a GPU is here, else the reason (tests pass one that says yes, to
    drive a stand-in ncu through the whole path on a machine without a GPU).
    """
    started = time.monotonic()
    if not candidate.is_file():
        raise CandidateNotFound(f"candidate file {candidate} does not exist")
    status = ncu_available(gpu_check, config.ncu_path)
    if not status.available or status.path is None:
        return DeepProfileResult(False, status.reason or "ncu is not usable here", (), (), time.monotonic() - started)
    private = Path(tempfile.mkdtemp(prefix="openkernel-ncu-"))
    try:
        label, sizes = problem_sizes(problem, config.size, config.size_overrides, on_gpu=True)
        # ncu runs in the private directory: a relative --report would vanish with it.
        kept = config.report_path.resolve() if config.report_path is not None else None
        report = kept or (private / "profile.ncu-rep" if config.source_counters else None)
        log_path = private / "ncu-raw.csv"
        metrics = list(metric_names())
        driver = _driver(problem, candidate, sizes, config)

        def attempt() -> tuple[list[str], _Run]:
            cmd = build_command(
                status.path or "ncu",
                driver,
                metrics,
                config.kernel_regex,
                config.launch_count,
                config.source_counters,
                report,
                log_path=log_path,
            )
            return cmd, _run_isolated(cmd, private, config.cache_dir, log_path, config.timeout_s)

        cmd, run = attempt()
        kernels = parse_raw_csv(run.tool_output)
        rejected = unknown_metrics(run.tool_output + run.output, metrics) if not kernels else ()
        if rejected:  # an ncu that errors on a metric this GPU lacks, instead of printing n/a: once more without
            metrics = [m for m in metrics if m not in rejected]
            cmd, run = attempt()
            kernels = parse_raw_csv(run.tool_output)
        denied = diagnose(run.tool_output + run.output)
        elapsed = time.monotonic() - started
        if denied is not None:
            return DeepProfileResult(False, denied, (), tuple(cmd), elapsed)
        if not kernels:
            return DeepProfileResult(True, _why_empty(run, config.timeout_s), (), tuple(cmd), elapsed)
        note = ""
        if config.source_counters and report is not None:
            kernels, note = _with_source(status.path, report, kernels, private, config)
        names = sorted({k.kernel_name for k in kernels})
        message = (
            f"profiled {len(kernels)} kernel launch(es) of {', '.join(names)} at size {label} "
            f"with ncu {status.version}{note}"
        )
        return DeepProfileResult(True, message, tuple(kernels), tuple(cmd), time.monotonic() - started)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _with_source(
    ncu: str, report: Path, kernels: list[KernelProfile], private: Path, config: DeepProfileConfig
) -> tuple[list[KernelProfile], str]:
    """Read the saved report's source page (no GPU needed) and attach its lines to the launches."""
    found = report if report.is_file() else report.with_name(report.name + ".ncu-rep")
    if not found.is_file():
        return kernels, f"; no report at {report}, so no source counters"
    log_path = private / "ncu-source.csv"
    run = _run_isolated(source_command(ncu, found, log_path), private, config.cache_dir, log_path, _IMPORT_TIMEOUT_S)
    blocks = parse_source_csv(run.tool_output)
    if not any(block.lines for block in blocks):
        return kernels, "; the source page had no source lines (build the kernel with line info)"
    return attach_source(kernels, blocks), ""


# ------------------------------------------------------------------------------------ the analytic part


@dataclass(frozen=True)
class AnalyticProfile:
    """The roofline of the reference at one size, with no GPU: FLOPs and minimal bytes against ceilings."""

    roofline: Roofline
    size: str  # the size's name and any overrides: "small", "full dim=1024"
    sizes: tuple[tuple[str, int | float], ...]  # the module constants that were set
    hardware: str  # the GPU whose ceilings were used, "H200"


def analytic_profile(
    problem: Problem,
    size: str = "auto",
    size_overrides: Sequence[tuple[str, int | float]] = (),
    hardware: str = "H200",
    cache_dir: Path | None = None,
    measured_time_ms: float | None = None,
    on_gpu: bool = False,
) -> AnalyticProfile:
    """Count the reference's work and analyse it against ``hardware``; with ``measured_time_ms``, place
    a kernel that took that long (ncu's durations) on the roofline and name its bottleneck.

    ``on_gpu`` picks the size the way the evaluator does on a GPU (full unless asked otherwise), and
    counts with one forward on the GPU when there is one (a full-size matmul is slow on the CPU). The
    reference is trusted code (the user's own file).
    """
    import torch

    from openkernel.evaluate import harness as h
    from openkernel.hardware import calibration_for, ceilings, spec_by_name
    from openkernel.profile.roofline import analyse, count_work

    spec = spec_by_name(hardware)
    label, sizes = problem_sizes(problem, size, size_overrides, on_gpu=on_gpu)
    device = torch.device("cuda" if on_gpu and torch.cuda.is_available() else "cpu")
    try:
        module = h.import_file(problem.path, "openkernel_problem_analytic")
        h.apply_sizes(module, sizes, only_existing=False)
        with torch.no_grad():
            model = h.build_model(module, module.Model, 0).to(device)
            inputs = h.build_inputs(module, 0, device)
            work = count_work(model, inputs)
    except Exception as exc:
        raise BadProblem(
            f"{problem.path}: the reference failed on the {device.type.upper()}: {type(exc).__name__}: {exc}"
        ) from None
    calibration = calibration_for(spec, cache_dir or default_cache_dir())
    roof = analyse(work.flop_count, work.min_bytes, None, ceilings(spec, calibration), measured_time_ms)
    return AnalyticProfile(roof, label, tuple(sizes), spec.name)
