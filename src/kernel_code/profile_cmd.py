"""``kernel-code profile REFERENCE CANDIDATE``: the candidate's kernels under Nsight Compute.

Per kernel launch: DRAM throughput, L2 and L1 hit rates, achieved and theoretical occupancy, SM
throughput, tensor-pipe activity, registers, shared memory, local-memory (spill) traffic and the
dominant warp stalls; with ``--source`` also the source lines that move the most memory. Without ncu
or a GPU it prints why (and how to fix it) and then the analytic roofline, which needs neither.
Exit codes: 0 when it printed a profile or the analytic fallback, 1 when ncu ran but produced no
profile (the message says why), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kernel_code.arguments import add_problem_arguments, positive_float
from kernel_code.render import print_diagnosis
from openkernel import OpenKernelError, load_problem
from openkernel.critic import Diagnosis, KernelMetrics, RuleCritic, Snapshot, op_classes_of
from openkernel.evaluate import default_cache_dir
from openkernel.hardware import detect
from openkernel.profile.deep import AnalyticProfile, DeepProfileConfig, analytic_profile, deep_profile
from openkernel.profile.ncu import KernelProfile, SourceLineCounters
from openkernel.types import Problem

__all__ = ["add_parser", "run"]

_TOP_LINES = 8  # source lines shown per kernel with --source


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression ({err})") from None
    return text


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "profile", help="profile a candidate's kernels with Nsight Compute (the analytic roofline without one)"
    )
    add_problem_arguments(parser)
    parser.add_argument("--kernels", type=_regex, default=None, metavar="REGEX", help="only kernels whose name matches")
    parser.add_argument("--launches", type=_count, default=20, metavar="N", help="kernel launches to profile at most")
    parser.add_argument("--source", action="store_true", help="also per-source-line memory counters (a heatmap)")
    parser.add_argument("--hardware", default="H200", help="the analytic roofline's GPU when ncu can't run")
    parser.add_argument("--report", type=Path, default=None, help="keep ncu's report here (open it with ncu-ui)")
    parser.add_argument("--timeout", type=positive_float, default=600.0, help="seconds for the whole ncu run")
    return parser


def run(args: argparse.Namespace) -> int:
    if not args.candidate.is_file():
        print(f"kernel-code: error: candidate file {args.candidate} does not exist", file=sys.stderr)
        return 2
    problem = load_problem(args.reference, kernelbench=args.kernelbench)
    config = DeepProfileConfig(
        size=args.size,
        size_overrides=tuple(args.overrides),
        kernel_regex=args.kernels,
        launch_count=args.launches,
        source_counters=args.source,
        report_path=args.report,
        timeout_s=args.timeout,
    )
    result = deep_profile(problem, args.candidate, config)
    analytic = None
    if not result.available:
        analytic = analytic_profile(problem, args.size, tuple(args.overrides), args.hardware, default_cache_dir())
    elif result.kernels:
        analytic = _measured_roofline(problem, args, result.kernels)
    diagnosis = _diagnose(result.kernels, analytic)
    if args.json:
        payload = result.to_json()
        payload["analytic"] = None if analytic is None else _analytic_json(analytic)
        payload["diagnosis"] = diagnosis.to_json()
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        console = Console()
        console.print(result.message, markup=False, highlight=False)
        for kernel in result.kernels:
            _print_kernel(kernel, console)
        if analytic is not None:
            _print_analytic(analytic, problem.name, console)
        print_diagnosis(diagnosis, console)
    return 0 if not result.available or result.kernels else 1


def _measured_roofline(
    problem: Problem, args: argparse.Namespace, kernels: tuple[KernelProfile, ...]
) -> AnalyticProfile | None:
    """The problem's roofline on this GPU with ncu's kernel time (one forward's launches, summed).

    None when the time is not one whole forward (launches cut off by --launches, or a kernel without
    a duration) or the work cannot be counted: the diagnosis then goes on ncu's metrics alone.
    """
    durations = [k.duration_ms for k in kernels]
    if len(kernels) >= args.launches or any(d is None for d in durations):
        return None
    gpu = detect()
    hardware = gpu.spec.name if gpu is not None and gpu.spec is not None else args.hardware
    try:
        return analytic_profile(problem, args.size, tuple(args.overrides), hardware, default_cache_dir(),
                                measured_time_ms=sum(d for d in durations if d is not None), on_gpu=True)  # fmt: skip
    except OpenKernelError:
        return None


def _diagnose(kernels: tuple[KernelProfile, ...], analytic: AnalyticProfile | None) -> Diagnosis:
    """The critic on what was measured: ncu's per-kernel numbers, or the analytic roofline alone."""
    launches = Counter(k.kernel_name for k in kernels)
    metrics = tuple(
        KernelMetrics(
            name=k.kernel_name,
            dram_throughput_pct=k.dram_throughput_pct,
            l2_hit_rate_pct=k.l2_hit_rate_pct,
            l1_hit_rate_pct=k.l1_hit_rate_pct,
            achieved_occupancy_pct=k.achieved_occupancy_pct,
            theoretical_occupancy_pct=k.theoretical_occupancy_pct,
            sm_throughput_pct=k.sm_throughput_pct,
            tensor_pipe_active_pct=k.tensor_pipe_active_pct,
            registers_per_thread=k.registers_per_thread,
            shared_bytes_per_block=k.shared_bytes_per_block,
            spill_bytes=k.spill_bytes,
            duration_ms=k.duration_ms,
            top_stalls=k.top_stalls,
            launches=launches[k.kernel_name],
        )
        for k in {k.kernel_name: k for k in kernels}.values()  # one entry per kernel: its first launch
    )
    roofline = analytic.roofline if analytic is not None else None
    ops = [rule.op for rule in roofline.flop_count.by_rule] if roofline is not None else []
    measured = roofline.measured_time_ms if roofline is not None else None
    snapshot = Snapshot(
        iteration=0, status="correct", runtime_ms=measured, speedup=None, roofline=roofline, kernels=metrics
    )
    return RuleCritic().critique(snapshot, None, op_classes_of(ops) or ("any",))


def _analytic_json(analytic: AnalyticProfile) -> dict[str, Any]:
    return {
        "size": analytic.size,
        "sizes": [list(pair) for pair in analytic.sizes],
        "hardware": analytic.hardware,
        "roofline": analytic.roofline.to_json(),
    }


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}%"


def _num(value: int | None, unit: str = "") -> str:
    return "—" if value is None else f"{value:,}{unit}"


def _print_kernel(kernel: KernelProfile, console: Console) -> None:
    heading = (
        f"{kernel.kernel_name} · launch {kernel.launch_index} · grid {kernel.grid_size} · block {kernel.block_size}"
    )
    console.print(heading, style="bold", markup=False, highlight=False)
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("duration", "—" if kernel.duration_ms is None else _time(kernel.duration_ms)),
        ("DRAM throughput", _pct(kernel.dram_throughput_pct)),
        ("DRAM bytes", _num(kernel.dram_bytes, " B")),
        ("L2 hit rate", _pct(kernel.l2_hit_rate_pct)),
        ("L1 hit rate", _pct(kernel.l1_hit_rate_pct)),
        ("SM throughput", _pct(kernel.sm_throughput_pct)),
        ("tensor pipe active", _pct(kernel.tensor_pipe_active_pct)),
        ("occupancy achieved", _pct(kernel.achieved_occupancy_pct)),
        ("occupancy theoretical", _pct(kernel.theoretical_occupancy_pct)),
        ("registers / thread", _num(kernel.registers_per_thread)),
        ("shared memory / block", _num(kernel.shared_bytes_per_block, " B")),
        ("local (spill) traffic", _num(kernel.spill_bytes, " B")),
    ]
    for label, value in rows:
        table.add_row(label, value)
    console.print(table)
    stalls = ", ".join(f"{reason} {share:.1f}%" for reason, share in kernel.top_stalls) or "—"
    console.print(f"top stalls (share of warp states): {stalls}", markup=False, highlight=False)
    if kernel.source_lines:
        _print_lines(kernel.source_lines, console)


def _print_lines(lines: tuple[SourceLineCounters, ...], console: Console) -> None:
    table = Table(title="source lines by global L2 sectors", title_justify="left", box=None, pad_edge=False)
    for column in ("line", "L2 sectors", "excessive", "shared wavefronts", "stall samples", "source"):
        table.add_column(
            column, justify="left" if column in ("line", "source") else "right", no_wrap=column != "source"
        )
    ranked = sorted(lines, key=lambda s: (-(s.l2_sectors_global or 0), -(s.stall_samples or 0), s.line))
    for s in ranked[:_TOP_LINES]:
        where = f"{Path(s.file).name}:{s.line}" if s.file else str(s.line)
        table.add_row(
            where,
            _num(s.l2_sectors_global),
            _num(s.l2_sectors_global_excessive),
            _num(s.l1_wavefronts_shared),
            _num(s.stall_samples),
            s.source.strip(),
        )
    console.print(table)


def _time(ms: float) -> str:
    return f"{ms * 1e3:.4g} us" if ms < 0.1 else f"{ms:.4g} ms"


def _print_analytic(analytic: AnalyticProfile, problem: str, console: Console) -> None:
    roof = analytic.roofline
    sizes = " ".join(f"{k}={v}" for k, v in analytic.sizes)
    intensity = roof.arithmetic_intensity_flops_per_byte
    measured = roof.measured_time_ms
    kind = "analytic roofline" if measured is None else f"roofline with ncu's kernel time {_time(measured)}"
    console.print(
        f"{kind} of {problem} (size {analytic.size}{': ' + sizes if sizes else ''}) on {analytic.hardware}:",
        markup=False,
        highlight=False,
    )
    console.print(
        f"  {roof.flops:,} FLOP · {roof.min_bytes:,} B · intensity "
        f"{'n/a' if intensity is None else f'{intensity:.3g}'} FLOP/B · speed of light {_time(roof.sol_time_ms)} "
        f"({roof.bound_by}-bound; {roof.bandwidth_source} bandwidth, "
        f"{roof.peak_flops_source} {roof.compute_ceiling} rate)",
        markup=False,
        highlight=False,
    )
    for sentence in roof.evidence:
        console.print(f"  {sentence}", markup=False, highlight=False)
