"""Nsight Compute (``ncu``): which metrics a deep profile asks for, the command line, and its CSV.

Nothing here runs a kernel. ``ncu_available`` says whether ncu and a GPU are here (and how to fix it
when not); ``build_command`` writes the ncu command line; ``parse_raw_csv`` and ``parse_source_csv``
read what ncu printed. ``openkernel.profile.deep`` runs the command in an isolated process.

Why the CSV and not NVIDIA's ``ncu_report`` module: the CSV needs nothing imported from the Nsight
Compute install (the module lives in its ``extras/python`` folder, or the ``ncu-report`` wheel), it
is what ``--csv`` documents, and it can be tested here without a GPU. The layouts, from NVIDIA's
Nsight Compute CLI documentation (https://docs.nvidia.com/nsight-compute/NsightComputeCli/):

* ``--page raw --csv``: one header row (``"ID","Process ID",...,"Kernel Name",...`` then one column
  per metric), one row of units (empty under the fixed columns), then one row per profiled kernel
  launch. ``--csv`` implies ``--print-units base``; we pass it anyway and still normalise scaled
  units (``Kbyte``, ``usecond``) in case a report was printed with ``--print-units auto``.
* ``--page source --csv --print-source cuda,sass`` (the page is documented, its CSV layout is not: this
  is how public scripts that read real output describe it, not yet checked on our H200): per profiled
  launch a ``"Kernel Name"`` row, a ``"File Name"`` row per source file, a header (``"Line No","Source",
  "Address","Source"`` then one column per source metric), then a row per source line (address ``-``,
  counters summed over its instructions) followed by that line's SASS rows (no line number). When a
  line row carries no sums, its SASS rows are added up instead.

A metric that does not exist on a GPU prints ``n/a`` (Nsight Compute's Profiling Guide, FAQ), so
every candidate name of a field is requested and the parser keeps those that came back.
"""

from __future__ import annotations

import csv
import glob
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

__all__ = [
    "FIELDS",
    "METRICS",
    "PERMISSION_MESSAGE",
    "STALL_REASONS",
    "KernelProfile",
    "MetricField",
    "NcuStatus",
    "SourceBlock",
    "SourceLineCounters",
    "attach_source",
    "build_command",
    "default_gpu_check",
    "diagnose",
    "error_lines",
    "find_ncu",
    "metric_names",
    "ncu_available",
    "parse_raw_csv",
    "parse_source_csv",
    "source_command",
    "stall_metric",
    "unknown_metrics",
]


@dataclass(frozen=True)
class MetricField:
    """One field of :class:`KernelProfile` and the ncu metrics it is read from."""

    name: str  # the KernelProfile attribute, unit in the name
    metrics: tuple[str, ...]
    combine: str  # "first": the metric; "sum": the parts that came back; "max": the busiest candidate


# Names: the launch, occupancy, warp-stall and source metrics are in the Metrics Reference of NVIDIA's
# Profiling Guide (https://docs.nvidia.com/nsight-compute/ProfilingGuide/#metrics-reference); the
# PerfWorks counters follow its "Metrics Structure" (unit__quantity.rollup.submetric) and came back on
# the H200 with ncu 2025.3.1 (shared/ENVIRONMENT.md: dram, lts, sm warps/throughput, duration, bytes,
# registers). Check the rest there with `ncu --query-metrics-mode suffix --metrics <base names>`.
FIELDS: tuple[MetricField, ...] = (
    # % of peak DRAM (HBM) bandwidth over the kernel's elapsed cycles.
    MetricField("dram_throughput_pct", ("dram__throughput.avg.pct_of_peak_sustained_elapsed",), "first"),
    # Share of L2 sector lookups that hit (lts = L2 slice, t = tag stage).
    MetricField("l2_hit_rate_pct", ("lts__t_sector_hit_rate.pct",), "first"),
    # Share of L1/TEX sector lookups that hit.
    MetricField("l1_hit_rate_pct", ("l1tex__t_sector_hit_rate.pct",), "first"),
    # Achieved occupancy: active warps per active cycle, % of the SM's maximum.
    MetricField("achieved_occupancy_pct", ("sm__warps_active.avg.pct_of_peak_sustained_active",), "first"),
    # Theoretical occupancy from the launch's registers, shared memory and block size (Occupancy Metrics).
    MetricField("theoretical_occupancy_pct", ("sm__maximum_warps_per_active_cycle_pct",), "first"),
    # SM throughput: the busiest of the SM's sub-unit throughputs, % of peak.
    MetricField("sm_throughput_pct", ("sm__throughput.avg.pct_of_peak_sustained_elapsed",), "first"),
    # Tensor pipeline busy, % of peak: the "tensor" pipe (all MMA instructions), its HMMA (mma.sync) and
    # Hopper GMMA (wgmma) sub-pipes. Which exist depends on the GPU and ncu version; the busiest wins.
    MetricField(
        "tensor_pipe_active_pct",
        (
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
        ),
        "max",
    ),
    MetricField("registers_per_thread", ("launch__registers_per_thread",), "first"),
    # Static plus dynamic shared memory the kernel asked for (not the driver's reserved 1 KiB).
    MetricField(
        "shared_bytes_per_block",
        ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic"),
        "sum",
    ),
    # Local-memory bytes loaded and stored through L1: register spills (and any local arrays).
    MetricField(
        "spill_bytes",
        ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"),
        "sum",
    ),
    MetricField("duration_ms", ("gpu__time_duration.sum",), "first"),
    MetricField("dram_bytes", ("dram__bytes.sum",), "first"),
)

METRICS: dict[str, tuple[str, ...]] = {field.name: field.metrics for field in FIELDS}

# Warp states, as in the Profiling Guide's "Warp Stall Reasons" (smsp__pcsamp_warps_issue_stalled_*).
# We read the hardware-counter family smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio
# (widely used for the Warp State Statistics breakdown; not listed in the Profiling Guide, so checked
# on the H200 with --query-metrics): one value per kernel, no sampling. Each is the average number of
# warps in that state per issue-active cycle; a reason's percent is its share of the sum over all
# states, "selected" (the warp that issued) included. "gmma" and "warpgroup_arrive" are Hopper-era
# states that other GPUs report as n/a; "no_instruction" is singular in this family.
STALL_REASONS: tuple[str, ...] = (
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "gmma",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instruction",
    "not_selected",
    "selected",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
    "warpgroup_arrive",
)
TOP_STALLS = 3  # stall reasons kept per kernel, largest first

PERMISSION_MESSAGE = (
    "ncu may not read the GPU counters (ERR_NVGPUCTRPERM): run with the admin's permission "
    "(see NVIDIA's ERR_NVGPUCTRPERM page, https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
)
NOT_FOUND_MESSAGE = "ncu not found: install Nsight Compute or put it on PATH"
NO_GPU_MESSAGE = "no GPU here: ncu profiles kernels on an NVIDIA GPU; run kernel-code profile on a machine with one"


def stall_metric(reason: str) -> str:
    return f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"


def metric_names() -> tuple[str, ...]:
    """Every metric a deep profile requests: the fields' candidates, then the stall reasons."""
    names = [m for field in FIELDS for m in field.metrics]
    return tuple(dict.fromkeys([*names, *(stall_metric(r) for r in STALL_REASONS)]))


# ------------------------------------------------------------------------------------- availability


@dataclass(frozen=True)
class NcuStatus:
    """Whether a deep profile can run here: ncu runs and a GPU is present."""

    available: bool
    path: str | None  # the ncu executable, None when not found
    version: str | None  # "2025.3.1.0", as `ncu --version` prints it
    reason: str | None  # one line, what is missing and how to fix it; None when available


def find_ncu() -> str | None:
    """ncu on PATH, else the newest one in the usual install folders."""
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda*/bin/ncu"):
        matches = sorted(glob.glob(pattern), reverse=True)
        if matches:
            return matches[0]
    return None


def default_gpu_check() -> str | None:
    """None when torch sees a CUDA GPU here, else the one-line reason.

    Only counts devices: no CUDA context is made in this process, which stays out of the GPU's way
    while the profiled process runs (a context here would even block it in exclusive-process mode).
    """
    import torch

    try:
        present = torch.cuda.is_available()
    except (RuntimeError, AssertionError):  # a driver that will not start
        present = False
    return None if present else NO_GPU_MESSAGE


def ncu_available(gpu_check: Callable[[], str | None] = default_gpu_check, ncu: str | None = None) -> NcuStatus:
    """Find ncu, ask its version, then check for a GPU. Never raises for a missing tool or GPU."""
    path = ncu or find_ncu()
    if path is None:
        return NcuStatus(False, None, None, NOT_FOUND_MESSAGE)
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return NcuStatus(False, path, None, f"ncu at {path} does not run ({err}): reinstall Nsight Compute")
    text = proc.stdout + proc.stderr
    if proc.returncode != 0:
        first = next((line for line in text.splitlines() if line.strip()), f"exit code {proc.returncode}")
        return NcuStatus(False, path, None, f"ncu at {path} does not run ({first.strip()}): reinstall Nsight Compute")
    match = re.search(r"Version\s+(\S+)", text)
    version = match.group(1) if match else (text.strip().splitlines() or ["unknown"])[-1].strip()
    no_gpu = gpu_check()
    if no_gpu is not None:
        return NcuStatus(False, path, version, no_gpu)
    return NcuStatus(True, path, version, None)


def diagnose(tool_output: str) -> str | None:
    """A one-line reason when ncu's output says it could not profile for a reason the user can fix."""
    if "ERR_NVGPUCTRPERM" in tool_output:
        return PERMISSION_MESSAGE
    return None


def error_lines(tool_output: str) -> list[str]:
    """ncu's ``==ERROR==`` lines, without the prefix."""
    return [line.removeprefix("==ERROR==").strip() for line in tool_output.splitlines() if line.startswith("==ERROR==")]


def unknown_metrics(tool_output: str, requested: Sequence[str]) -> tuple[str, ...]:
    """Requested metrics that ncu's error lines name: an ncu that rejects (rather than n/a's) a metric
    this GPU lacks. Matched by name, so the wording of the error does not matter."""
    errors = "\n".join(error_lines(tool_output))

    def named(name: str) -> bool:  # the whole name, not a prefix of a longer metric
        return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w|\.\w)", errors) is not None

    return tuple(m for m in requested if named(m) or named(m.split(".")[0]))


# -------------------------------------------------------------------------------------- the command


def build_command(
    ncu: str,
    script: list[str],
    metrics: Sequence[str],
    kernel_filter: str | None,
    launch_count: int,
    source_counters: bool,
    report_path: Path | None,
    log_path: Path | None = None,
) -> list[str]:
    """The ncu command line that profiles ``script`` (the driver) and prints the raw page as CSV.

    * ``--clock-control none``: the card's clocks stay as they are (we never lock or reset them).
    * ``--profile-from-start off``: only launches between the driver's cudaProfilerStart/Stop count,
      so imports, builds and warm-up calls are not profiled.
    * ``--page raw --csv --print-units base``: one row per launch, every metric in its base unit.
    * ``--print-kernel-base function``: kernel names without parameters, as ``--kernel-name`` matches.
    * ``--log-file``: ncu's own output (the CSV) goes to a file, apart from whatever the candidate prints.
    * source counters: ``--section SourceCounters`` adds the per-instruction source metrics and warp
      samples; a report must be saved (``--export``, with ``--import-source yes`` so it keeps the source
      text), because one ncu run prints one page: :func:`source_command` prints the source page from it.
    """
    if source_counters and report_path is None:
        raise ValueError("source counters need a report_path: the source page is printed from the saved report")
    cmd = [
        ncu,
        *["--clock-control", "none", "--target-processes", "all", "--profile-from-start", "off"],
        *["--csv", "--page", "raw", "--print-units", "base", "--print-kernel-base", "function"],
        *("--metrics", ",".join(metrics), "--launch-count", str(launch_count)),
    ]
    if kernel_filter:
        cmd += ["--kernel-name", f"regex:{kernel_filter}"]
    if source_counters:
        cmd += ["--section", "SourceCounters", "--import-source", "yes"]
    if report_path is not None:
        cmd += ["--export", str(report_path), "--force-overwrite"]
    if log_path is not None:
        cmd += ["--log-file", str(log_path)]
    return cmd + script


def source_command(ncu: str, report_path: Path, log_path: Path | None = None) -> list[str]:
    """Print a saved report's source page: CUDA (or Triton Python) lines with their SASS, as CSV."""
    cmd = [
        ncu,
        *("--import", str(report_path)),
        *["--csv", "--page", "source", "--print-source", "cuda,sass"],
        *["--print-units", "base", "--print-kernel-base", "function"],
    ]
    return cmd + (["--log-file", str(log_path)] if log_path is not None else [])


# --------------------------------------------------------------------------------------- the values


@dataclass(frozen=True)
class SourceLineCounters:
    """One source line of a kernel and the source counters of its instructions (a heatmap cell).

    The source page has no per-line hit rates: the L2 figures are *theoretical* sectors, what the
    addresses of the line's global accesses require; "excessive" is what uncoalesced access adds.
    """

    file: str  # as ncu prints it ("" when the page names none)
    line: int
    source: str  # the line's text
    instructions_executed: int | None  # warp-level
    stall_samples: int | None  # warp-state samples at the line's instructions
    l2_sectors_global: int | None  # 32-byte sectors requested in L2 by global loads and stores
    l2_sectors_global_ideal: int | None  # the same if every active thread's access were coalesced
    l2_sectors_global_excessive: int | None
    l2_sectors_local: int | None  # local memory (spills)
    l1_wavefronts_shared: int | None  # shared-memory wavefronts (bank conflicts make more)
    l1_wavefronts_shared_ideal: int | None


@dataclass(frozen=True)
class KernelProfile:
    """One profiled kernel launch. ``None``: ncu did not return that metric (n/a or not requested)."""

    kernel_name: str
    launch_index: int  # ncu's result ID, in launch order
    grid_size: str | None  # "(64, 1, 1)"
    block_size: str | None
    dram_throughput_pct: float | None
    l2_hit_rate_pct: float | None
    l1_hit_rate_pct: float | None
    achieved_occupancy_pct: float | None
    theoretical_occupancy_pct: float | None
    sm_throughput_pct: float | None
    tensor_pipe_active_pct: float | None
    registers_per_thread: int | None
    shared_bytes_per_block: int | None
    spill_bytes: int | None  # local-memory bytes loaded + stored
    duration_ms: float | None
    dram_bytes: int | None
    top_stalls: tuple[tuple[str, float], ...]  # (reason, % of warp states), largest first, "selected" left out
    source_lines: tuple[SourceLineCounters, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["top_stalls"] = [list(pair) for pair in self.top_stalls]
        return data


_INT_FIELDS = frozenset({"registers_per_thread", "shared_bytes_per_block", "spill_bytes", "dram_bytes"})
_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}  # ncu scales decimally
_SECONDS = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "ns": 1e-9, "us": 1e-6, "ms": 1e-3}
_SCALED = re.compile(r"^([KMGTP]?)(byte|sector|inst|warp|cycle|request|wavefront|thread|block|register)s?$")


def _number(text: str) -> float | None:
    """``"1,234.5"`` -> 1234.5; ``"n/a"``, ``""``, ``"-"`` -> None."""
    cleaned = text.strip().replace(",", "")
    if cleaned in ("", "-", "n/a", "N/A"):
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


def _to_base(value: float, unit: str) -> float:
    """A value in ncu's unit -> the base unit: seconds, bytes, counts; "%" and ratios unchanged."""
    head = unit.strip().split("/")[0]
    if head in _SECONDS:
        return value * _SECONDS[head]
    match = _SCALED.match(head)
    return value * _PREFIX[match.group(1)] if match else value


def _rows(text: str) -> list[list[str]]:
    """CSV rows of ncu's output, without its own ``==PROF==`` / ``==WARNING==`` lines."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("==")]
    return list(csv.reader(lines))


def _field_value(field: MetricField, values: dict[str, float]) -> float | None:
    present = [values[m] for m in field.metrics if m in values]
    if not present:
        return None
    if field.combine == "sum":
        return sum(present)
    if field.combine == "max":
        return max(present)
    return present[0]


def _top_stalls(values: dict[str, float]) -> tuple[tuple[str, float], ...]:
    states = {r: values[stall_metric(r)] for r in STALL_REASONS if stall_metric(r) in values}
    total = sum(states.values())
    if total <= 0:
        return ()
    ranked = sorted(((r, 100.0 * v / total) for r, v in states.items() if r != "selected" and v > 0), key=_by_share)
    return tuple(ranked[:TOP_STALLS])


def _by_share(item: tuple[str, float]) -> tuple[float, str]:
    return (-item[1], item[0])


def _cell(row: list[str], col: dict[str, int], name: str) -> str | None:
    if name not in col:
        return None
    return row[col[name]].strip() or None


def parse_raw_csv(text: str) -> list[KernelProfile]:
    """Every kernel launch in ncu's ``--page raw --csv`` output (none when there is no table)."""
    rows = _rows(text)
    start = next((i for i, r in enumerate(rows) if r and r[0] == "ID" and "Kernel Name" in r), None)
    if start is None:
        return []
    header = rows[start]
    col = {name: i for i, name in reversed(list(enumerate(header)))}
    units = [""] * len(header)
    body = rows[start + 1 :]
    if body and len(body[0]) == len(header) and body[0][0] == "":
        units, body = body[0], body[1:]
    metric_cols = [(i, name) for i, name in enumerate(header) if "__" in name]
    out = []
    for row in body:
        if len(row) != len(header) or not row[0].strip().isdigit():
            continue
        values = {}
        for i, name in metric_cols:
            number = _number(row[i])
            if number is not None:
                values[name] = _to_base(number, units[i])
        fields: dict[str, Any] = {}
        for field in FIELDS:
            value = _field_value(field, values)
            if value is not None and field.name == "duration_ms":
                value *= 1e3  # seconds -> ms
            fields[field.name] = round(value) if value is not None and field.name in _INT_FIELDS else value
        out.append(
            KernelProfile(
                kernel_name=_cell(row, col, "Kernel Name") or "",
                launch_index=int(row[0]),
                grid_size=_cell(row, col, "Grid Size"),
                block_size=_cell(row, col, "Block Size"),
                top_stalls=_top_stalls(values),
                **fields,
            )
        )
    return out


# ------------------------------------------------------------------------------------ the source page

# SourceLineCounters field -> the column's label on the source page, and its metric name (printed
# instead of the label with --print-metric-name name).
_SOURCE_COLUMNS: dict[str, tuple[str, ...]] = {
    "instructions_executed": ("Instructions Executed", "inst_executed"),
    "stall_samples": ("Warp Stall Sampling (All Samples)", "smsp__pcsamp_sample_count"),
    "l2_sectors_global": ("L2 Theoretical Sectors Global", "memory_l2_theoretical_sectors_global"),
    "l2_sectors_global_ideal": ("L2 Theoretical Sectors Global Ideal", "memory_l2_theoretical_sectors_global_ideal"),
    "l2_sectors_global_excessive": (
        "L2 Theoretical Sectors Global Excessive",
        "derived__memory_l2_theoretical_sectors_global_excessive",
    ),
    "l2_sectors_local": ("L2 Theoretical Sectors Local", "memory_l2_theoretical_sectors_local"),
    "l1_wavefronts_shared": ("L1 Wavefronts Shared", "memory_l1_wavefronts_shared"),
    "l1_wavefronts_shared_ideal": ("L1 Wavefronts Shared Ideal", "memory_l1_wavefronts_shared_ideal"),
}


@dataclass(frozen=True)
class SourceBlock:
    """The source page of one profiled launch."""

    kernel_name: str
    lines: tuple[SourceLineCounters, ...]


class _Block:
    def __init__(self, name: str) -> None:
        self.name = name
        self.file = ""
        self.columns: dict[str, int] = {}
        self.lines: list[SourceLineCounters] = []
        self.pending: tuple[str, int, str, dict[str, int | None]] | None = None  # the line being summed
        self.sass: dict[str, int] = {}

    def flush(self) -> None:
        if self.pending is None:
            return
        file, line, source, counts = self.pending
        if all(v is None for v in counts.values()):  # the line row had no sums: add up its instructions
            counts = {k: self.sass.get(k) for k in _SOURCE_COLUMNS}
        if any(v is not None for v in counts.values()):
            self.lines.append(SourceLineCounters(file, line, source, **counts))
        self.pending, self.sass = None, {}

    def counters(self, row: list[str]) -> dict[str, int | None]:
        out: dict[str, int | None] = {}
        for field, i in self.columns.items():
            number = _number(row[i]) if i < len(row) else None
            out[field] = None if number is None else round(number)
        return out


def parse_source_csv(text: str) -> list[SourceBlock]:
    """Per profiled launch, its source lines and their counters, from ``--page source --csv``."""
    blocks: list[_Block] = []
    for row in _rows(text):
        first = row[0].strip()
        if first == "Kernel Name":
            if blocks:
                blocks[-1].flush()
            blocks.append(_Block(row[1].strip() if len(row) > 1 else ""))
            continue
        if not blocks:
            blocks.append(_Block(""))
        block = blocks[-1]
        if first == "File Name":
            block.flush()
            block.file = row[1].strip() if len(row) > 1 else ""
        elif first == "Line No":
            block.flush()
            index = {name.strip(): i for i, name in reversed(list(enumerate(row)))}
            block.columns = {
                field: index[name] for field, names in _SOURCE_COLUMNS.items() for name in names if name in index
            }
        elif first.isdigit() and block.columns:
            block.flush()
            block.pending = (block.file, int(first), row[1] if len(row) > 1 else "", block.counters(row))
        elif block.pending is not None and block.columns:  # a SASS row of the current line
            for field, value in block.counters(row).items():
                if value is not None:
                    block.sass[field] = block.sass.get(field, 0) + value
    if blocks:
        blocks[-1].flush()
    return [SourceBlock(b.name, tuple(b.lines)) for b in blocks if b.lines or b.name]


def attach_source(kernels: Sequence[KernelProfile], blocks: Sequence[SourceBlock]) -> list[KernelProfile]:
    """Give each kernel launch its source block: both pages list launches in the same order."""
    out = []
    queue = list(blocks)
    for kernel in kernels:
        if queue and queue[0].kernel_name in ("", kernel.kernel_name):
            out.append(replace(kernel, source_lines=queue.pop(0).lines))
        else:
            out.append(kernel)
    return out
