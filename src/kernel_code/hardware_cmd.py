"""``kernel-code hardware [--json] [--calibrate]``: the GPU table, the GPU here, and its measured ceilings.

The roofline in ``kernel-code eval`` divides by these ceilings; this command shows which ones it will
use and where they came from (a calibration measured on this card, or the vendor's datasheet).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from openkernel.evaluate import default_cache_dir
from openkernel.hardware import (
    Calibration,
    Ceilings,
    DetectedGpu,
    calibrate,
    ceilings,
    detect,
    list_calibrations,
    load_calibration,
    save_calibration,
    specs,
)

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "hardware", help="list GPU specs, the GPU detected here, and measured ceilings"
    )
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="measure this GPU's copy bandwidth and matmul rates (a few seconds) and cache them",
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=None, help="where calibrations live (default: the openkernel cache)"
    )
    return parser


def _ceilings_for(gpu: DetectedGpu | None, cache_dir: Path) -> Ceilings | None:
    if gpu is None or gpu.spec is None:
        return None
    return ceilings(gpu.spec, load_calibration(gpu.name, cache_dir))


def run(args: argparse.Namespace) -> int:
    cache_dir: Path = args.cache_dir or default_cache_dir()
    gpu = detect()
    if args.calibrate:
        if gpu is None:
            print("kernel-code: error: --calibrate needs a CUDA GPU, and none was detected", file=sys.stderr)
            return 2
        path = save_calibration(calibrate("cuda"), cache_dir)
        print(f"calibration saved to {path}", file=sys.stderr)
    found = list_calibrations(cache_dir)
    chosen = _ceilings_for(gpu, cache_dir)
    if args.json:
        payload = {
            "table": [spec.to_json() for spec in specs()],
            "detected": None if gpu is None else gpu.to_json(),
            "calibrations": [cal.to_json() for cal in found],
            "ceilings": None if chosen is None else chosen.to_json(),
        }
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        _print(gpu, found, chosen, Console())
    return 0


def _tera(value: float | None) -> str:
    return "—" if value is None else f"{value / 1e12:g}"


def _print(gpu: DetectedGpu | None, found: tuple[Calibration, ...], chosen: Ceilings | None, console: Console) -> None:
    table = Table(title="GPU datasheets (dense TFLOP/s)", header_style="bold", box=None, pad_edge=False)
    for column in ("GPU", "HBM TB/s", "FP32", "TF32", "FP16", "BF16", "FP8", "L2 MiB", "SMs", "GiB", "sm"):
        table.add_column(column, justify="left" if column == "GPU" else "right", no_wrap=True)
    for spec in specs():
        table.add_row(
            spec.name,
            _tera(spec.hbm_bytes_per_s),
            _tera(spec.fp32_flops_per_s),
            _tera(spec.tf32_dense_flops_per_s),
            _tera(spec.fp16_dense_flops_per_s),
            _tera(spec.bf16_dense_flops_per_s),
            _tera(spec.fp8_dense_flops_per_s),
            f"{spec.l2_bytes / 2**20:g}",
            str(spec.sm_count),
            f"{spec.hbm_bytes / 2**30:g}",
            "{}{}".format(*spec.compute_capability),
        )
    console.print(table)
    if gpu is None:
        console.print("no GPU detected: the roofline uses --hardware, measured parts are null")
    else:
        row = "not in the table" if gpu.spec is None else f"table row {gpu.spec.name}"
        console.print(
            f"detected [bold]{gpu.name}[/]: {gpu.sm_count} SMs, L2 {gpu.l2_bytes / 2**20:g} MiB, "
            f"{gpu.memory_bytes / 2**30:.1f} GiB, sm_{gpu.compute_capability[0]}{gpu.compute_capability[1]} ({row})"
        )
    for cal in found:
        rates = ", ".join(f"{key} {rate / 1e12:.1f}" for key, rate in cal.matmul_flops_per_s.items())
        console.print(
            f"calibration {cal.gpu_name} ({cal.date}): copy {cal.copy_bytes_per_s / 1e12:.2f} TB/s; "
            f"matmul TFLOP/s {rates}"
        )
    if not found:
        console.print("no calibration cached: run kernel-code hardware --calibrate on the GPU")
    if chosen is not None:
        rates = ", ".join(f"{c.key} {c.flops_per_s / 1e12:.1f} ({c.source})" for c in chosen.compute)
        console.print(
            f"roofline ceilings here: bandwidth {chosen.bandwidth_bytes_per_s / 1e12:.2f} TB/s "
            f"({chosen.bandwidth_source}); TFLOP/s {rates}"
        )
