"""GPU specifications as numbers with units in the names.

A small table for now: the evaluator's physics gate needs the peak memory bandwidth of the GPU it
timed on. Datasheet figures are upper bounds, which is what a gate wants (a kernel cannot beat
them); measured ceilings come with ``kernel-code calibrate``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GpuSpec", "find_spec"]


@dataclass(frozen=True)
class GpuSpec:
    name: str
    hbm_bytes_per_s: float  # datasheet peak DRAM bandwidth
    l2_bytes: int


# Order matters: the first pattern contained in the device name wins ("H100 PCIe" before "H100").
_SPECS: tuple[tuple[str, GpuSpec], ...] = (
    ("H200", GpuSpec("H200", 4.8e12, 60 * 1024 * 1024)),
    ("H100 PCIE", GpuSpec("H100 PCIe", 2.0e12, 50 * 1024 * 1024)),
    ("H100", GpuSpec("H100 SXM", 3.35e12, 50 * 1024 * 1024)),
    ("B200", GpuSpec("B200", 8.0e12, 126 * 1024 * 1024)),
    ("A100-SXM4-80GB", GpuSpec("A100 80GB", 2.039e12, 40 * 1024 * 1024)),
    ("A100 80GB", GpuSpec("A100 80GB", 2.039e12, 40 * 1024 * 1024)),
    ("A100", GpuSpec("A100 40GB", 1.555e12, 40 * 1024 * 1024)),
    ("L40S", GpuSpec("L40S", 0.864e12, 96 * 1024 * 1024)),
    ("L4", GpuSpec("L4", 0.3e12, 48 * 1024 * 1024)),
    ("RTX 4090", GpuSpec("RTX 4090", 1.008e12, 72 * 1024 * 1024)),
)


def find_spec(device_name: str) -> GpuSpec | None:
    upper = device_name.upper()
    for pattern, spec in _SPECS:
        if pattern.upper() in upper:
            return spec
    return None
