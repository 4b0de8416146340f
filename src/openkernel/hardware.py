"""GPU specifications, run-time detection, and the measured ceilings a roofline should prefer.

Datasheet figures are leads: they are what a vendor promises, and a well-written kernel rarely gets
past 85-90% of them. The roofline (``openkernel.profile``) therefore prefers a *calibration*: a
device-to-device copy and a large matmul per dtype, measured once per GPU and cached as JSON. The
evaluator's physics gate still uses the datasheet bandwidth through ``find_spec``: a kernel cannot
beat a vendor's peak, so an upper bound is what a gate wants.
"""

from __future__ import annotations

import datetime
import importlib
import json
import re
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from openkernel.errors import ConfigError

__all__ = [
    "Calibration",
    "Ceilings",
    "ComputeCeiling",
    "DetectedGpu",
    "GpuSpec",
    "UnknownGpu",
    "calibrate",
    "calibration_for",
    "ceiling_key",
    "ceilings",
    "detect",
    "find_spec",
    "list_calibrations",
    "load_calibration",
    "peak_flops_per_s",
    "save_calibration",
    "spec_by_name",
    "specs",
]

_GIB = 1024**3
_MIB = 1024**2


@dataclass(frozen=True)
class GpuSpec:
    """One part's datasheet: dense rates (no 2:4 sparsity), fp32 accumulation for the tensor-core rates."""

    name: str
    hbm_bytes_per_s: float  # peak device-memory bandwidth (HBM, or GDDR on L40S/L4/RTX 4090)
    l2_bytes: int
    sm_count: int
    hbm_bytes: int  # nominal device memory; the device reports a little less (ECC, reserved)
    fp32_flops_per_s: float  # plain FP32 on the CUDA cores (what runs with TF32 off)
    tf32_dense_flops_per_s: float
    fp16_dense_flops_per_s: float
    bf16_dense_flops_per_s: float
    fp8_dense_flops_per_s: float | None  # None: no FP8 tensor cores (Ampere)
    compute_capability: tuple[int, int]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # compute_capability stays a tuple: JSON writes it as a list


# Sources: NVIDIA's product datasheets (A100, H100, H200, L40S, L4, HGX/DGX B200 per GPU), the Ada
# architecture whitepaper for the RTX 4090 (GeForce: tensor rates with fp32 accumulation, half the fp16-
# accumulate figure). Where a datasheet prints only the with-sparsity figure, the dense rate is half of
# it. SM counts and L2 sizes are what the device reports (detect() reads them again at run time).
_TABLE: tuple[GpuSpec, ...] = (
    GpuSpec("A100 40GB", 1.555e12, 40 * _MIB, 108, 40 * _GIB, 19.5e12, 156e12, 312e12, 312e12, None, (8, 0)),
    # SXM figure; the A100 80GB PCIe has 1.935e12 B/s.
    GpuSpec("A100 80GB", 2.039e12, 40 * _MIB, 108, 80 * _GIB, 19.5e12, 156e12, 312e12, 312e12, None, (8, 0)),
    GpuSpec("H100 SXM", 3.35e12, 50 * _MIB, 132, 80 * _GIB, 67e12, 494.5e12, 989.5e12, 989.5e12, 1979e12, (9, 0)),
    GpuSpec("H100 PCIe", 2.0e12, 50 * _MIB, 114, 80 * _GIB, 51e12, 378e12, 756.5e12, 756.5e12, 1513e12, (9, 0)),
    GpuSpec("H200", 4.8e12, 60 * _MIB, 132, 141 * _GIB, 67e12, 494.5e12, 989.5e12, 989.5e12, 1979e12, (9, 0)),
    GpuSpec("L40S", 0.864e12, 96 * _MIB, 142, 48 * _GIB, 91.6e12, 183e12, 362e12, 362e12, 733e12, (8, 9)),
    GpuSpec("L4", 0.3e12, 48 * _MIB, 58, 24 * _GIB, 30.3e12, 60e12, 121e12, 121e12, 242.5e12, (8, 9)),
    GpuSpec("B200", 8.0e12, 126 * _MIB, 148, 180 * _GIB, 75e12, 1.125e15, 2.25e15, 2.25e15, 4.5e15, (10, 0)),
    GpuSpec("RTX 4090", 1.008e12, 72 * _MIB, 128, 24 * _GIB, 82.6e12, 82.6e12, 165.2e12, 165.2e12, 330.3e12, (8, 9)),
)
_BY_NAME = {spec.name: spec for spec in _TABLE}

# Device names as torch / nvidia-smi print them ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
# "NVIDIA GeForce RTX 4090"). Order matters: the first match wins ("H100 PCIe" before "H100").
# Word boundaries keep "L40S" and "L40" from matching "L4".
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), name)
    for pattern, name in (
        (r"\bH200\b", "H200"),
        (r"\bH100\b.*\bPCIe\b", "H100 PCIe"),
        (r"\bH100\b", "H100 SXM"),
        (r"\bB200\b", "B200"),
        (r"\bA100\b.*\b80\s*GB\b", "A100 80GB"),
        (r"\bA100\b", "A100 40GB"),
        (r"\bL40S\b", "L40S"),
        (r"\bL4\b", "L4"),
        (r"\bRTX\s*4090\b", "RTX 4090"),
    )
)
# Short names a user may type for --hardware, after lower-casing and dropping everything but [a-z0-9].
_ALIASES = {"h100": "H100 SXM", "h100sxm5": "H100 SXM", "4090": "RTX 4090", "h200sxm": "H200"}


class UnknownGpu(ConfigError, ValueError):
    """A GPU name that is not in the table (a ``ValueError`` too, for callers that expect one)."""


def specs() -> tuple[GpuSpec, ...]:
    return _TABLE


def find_spec(device_name: str) -> GpuSpec | None:
    """The table row for a device name or label such as ``cuda:0 (NVIDIA H200)``; None if unknown."""
    for pattern, name in _PATTERNS:
        if pattern.search(device_name):
            return _BY_NAME[name]
    return None


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def spec_by_name(name: str) -> GpuSpec:
    """The spec a user asked for by name: "H200", "h100-sxm", "A100 80GB", or a full device name."""
    wanted = _squash(name)
    for spec in _TABLE:
        if _squash(spec.name) == wanted:
            return spec
    if wanted in _ALIASES:
        return _BY_NAME[_ALIASES[wanted]]
    found = find_spec(name)
    if found is None:
        known = ", ".join(spec.name for spec in _TABLE)
        raise UnknownGpu(f"unknown GPU {name!r}: use one of {known}")
    return found


# -------------------------------------------------------------------------------------- ceilings

_KEYS = ("fp32", "tf32", "fp16", "bf16", "fp8")
# Tensor-core ceiling per dtype; fp32 on tensor cores is TF32.
_TENSOR_CORE_KEYS = {torch.float32: "tf32", torch.float16: "fp16", torch.bfloat16: "bf16"} | {
    getattr(torch, n): "fp8" for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
}


def ceiling_key(dtype: torch.dtype, tensor_cores: bool) -> str:
    """Which compute ceiling work of ``dtype`` runs against: "fp32", "tf32", "fp16", "bf16" or "fp8".

    Without tensor cores every dtype gets the fp32 vector rate (the table has no separate half-precision
    vector rate, and fp64 or integer work is not what these problems time).
    """
    return _TENSOR_CORE_KEYS.get(dtype, "fp32") if tensor_cores else "fp32"


def _datasheet_rate(spec: GpuSpec, key: str) -> float | None:
    return {
        "fp32": spec.fp32_flops_per_s,
        "tf32": spec.tf32_dense_flops_per_s,
        "fp16": spec.fp16_dense_flops_per_s,
        "bf16": spec.bf16_dense_flops_per_s,
        "fp8": spec.fp8_dense_flops_per_s,
    }[key]


def peak_flops_per_s(spec: GpuSpec, dtype: torch.dtype, tensor_cores: bool) -> float:
    """The datasheet rate for ``dtype``. FP8 on a part without FP8 tensor cores gets the fp16 rate."""
    rate = _datasheet_rate(spec, ceiling_key(dtype, tensor_cores))
    return spec.fp16_dense_flops_per_s if rate is None else rate


@dataclass(frozen=True)
class ComputeCeiling:
    key: str  # "fp32", "tf32", "fp16", "bf16" or "fp8"
    flops_per_s: float
    source: str  # "measured" (a calibration's matmul) or "datasheet"


@dataclass(frozen=True)
class Ceilings:
    """The bandwidth and compute rates a roofline divides by, each saying where it came from."""

    gpu: str
    bandwidth_bytes_per_s: float
    bandwidth_source: str  # "measured" (device-to-device copy, read + written) or "datasheet"
    compute: tuple[ComputeCeiling, ...]

    def compute_for(self, dtype: torch.dtype, tensor_cores: bool) -> ComputeCeiling:
        key = ceiling_key(dtype, tensor_cores)
        by_key = {c.key: c for c in self.compute}
        return by_key.get(key) or by_key["fp16"]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def ceilings(spec: GpuSpec, calibration: Calibration | None) -> Ceilings:
    """Measured ceilings where the calibration has them, datasheet figures for the rest."""
    measured = calibration.matmul_flops_per_s if calibration is not None else {}
    compute = []
    for key in _KEYS:
        if key in measured:
            compute.append(ComputeCeiling(key, measured[key], "measured"))
        elif (rate := _datasheet_rate(spec, key)) is not None:
            compute.append(ComputeCeiling(key, rate, "datasheet"))
    if calibration is not None:
        return Ceilings(spec.name, calibration.copy_bytes_per_s, "measured", tuple(compute))
    return Ceilings(spec.name, spec.hbm_bytes_per_s, "datasheet", tuple(compute))


@dataclass(frozen=True)
class DetectedGpu:
    """What the device itself reports, and the table row it matches (with the device's SMs and L2)."""

    name: str  # "NVIDIA H200"
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    compute_capability: tuple[int, int]
    spec: GpuSpec | None  # None: a part the table does not know

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def detect(index: int = 0) -> DetectedGpu | None:
    """The GPU at ``index`` as torch sees it; None (never an exception) when there is none."""
    try:
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            return None
        props = torch.cuda.get_device_properties(index)
    except (RuntimeError, AssertionError):  # a CPU build, or a driver that will not start
        return None
    spec = find_spec(props.name)
    l2_bytes = int(props.L2_cache_size)
    if spec is not None:
        spec = replace(spec, sm_count=props.multi_processor_count, l2_bytes=l2_bytes)
    return DetectedGpu(
        props.name, props.multi_processor_count, l2_bytes, props.total_memory, (props.major, props.minor), spec
    )


# -------------------------------------------------------------------------------------- calibration


@dataclass(frozen=True)
class Calibration:
    """Ceilings measured on one GPU: what this card really does, which the roofline prefers."""

    gpu_name: str  # the device's own name, "NVIDIA H200"
    date: str  # ISO 8601, UTC
    copy_bytes_per_s: float  # large device-to-device copy: bytes read + bytes written per second
    matmul_flops_per_s: dict[str, float]  # by ceiling key: "fp32" (TF32 off), "tf32", "fp16", "bf16"
    torch_version: str
    cuda_version: str | None
    driver_version: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibration:
        rates = {str(k): float(v) for k, v in dict(data["matmul_flops_per_s"]).items()}
        cuda, driver = (None if data[k] is None else str(data[k]) for k in ("cuda_version", "driver_version"))
        gpu, date, torch_version = (str(data[k]) for k in ("gpu_name", "date", "torch_version"))
        return cls(gpu, date, float(data["copy_bytes_per_s"]), rates, torch_version, cuda, driver)


def _calibration_path(gpu_name: str, cache_dir: Path) -> Path:
    # An evaluator label "cuda:0 (NVIDIA H200)" names the same card as "NVIDIA H200".
    label = re.fullmatch(r"cuda(?::\d+)?\s*\((.+)\)", gpu_name.strip())
    name = label.group(1) if label else gpu_name
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"
    return cache_dir / "calibration" / f"{slug}.json"


def _read_calibration(path: Path) -> Calibration:
    try:
        return Calibration.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        reason = f"no {err} field" if isinstance(err, KeyError) else str(err)
        raise ConfigError(f"{path} is not a readable calibration ({reason}): delete it and calibrate again") from None


def load_calibration(gpu_name: str, cache_dir: Path) -> Calibration | None:
    """The calibration of the card named ``gpu_name`` (its own name, or an evaluator label), if cached."""
    path = _calibration_path(gpu_name, cache_dir)
    return _read_calibration(path) if path.is_file() else None


def calibration_for(spec: GpuSpec, cache_dir: Path) -> Calibration | None:
    """A cached calibration of a card of this part: a target's ceilings on a machine without it."""
    return next(
        (c for c in list_calibrations(cache_dir) if getattr(find_spec(c.gpu_name), "name", None) == spec.name), None
    )


def list_calibrations(cache_dir: Path) -> tuple[Calibration, ...]:
    folder = cache_dir / "calibration"
    return tuple(_read_calibration(p) for p in sorted(folder.glob("*.json"))) if folder.is_dir() else ()


def save_calibration(calibration: Calibration, cache_dir: Path) -> Path:
    path = _calibration_path(calibration.gpu_name, cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(calibration.to_json(), indent=2) + "\n")
    tmp.replace(path)  # atomic: a crash mid-write leaves the old file, not half a new one
    return path


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median of ``repeats`` CUDA-event timings of ``fn`` after three warm-up calls."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(float(start.elapsed_time(end)))
    return statistics.median(times)


def _copy_bytes_per_s(dev: torch.device, copy_bytes: int, repeats: int) -> float:
    src = torch.empty(copy_bytes // 4, dtype=torch.float32, device=dev).normal_()
    dst = torch.empty_like(src)
    return 2 * src.numel() * src.element_size() / (_median_ms(lambda: dst.copy_(src), repeats) / 1e3)


def _matmul_flops_per_s(dev: torch.device, dtype: torch.dtype, n: int, repeats: int) -> float:
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    return 2 * n**3 / (_median_ms(lambda: a @ b, repeats) / 1e3)


def _driver_version() -> str | None:
    try:
        nvml: Any = importlib.import_module("pynvml")
        nvml.nvmlInit()
        version = nvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # NVML is optional: no package, no library, or no permission
        return None


# The matmuls calibrate() times: (ceiling key, dtype, TF32 allowed).
_MATMULS = (
    ("fp32", torch.float32, False),
    ("tf32", torch.float32, True),
    ("fp16", torch.float16, False),
    ("bf16", torch.bfloat16, False),
)


def calibrate(
    device: str = "cuda", copy_bytes: int = 2 * _GIB, matmul_size: int = 8192, repeats: int = 10
) -> Calibration:
    """Measure this GPU's copy bandwidth and matmul rate per dtype (a few seconds on an H200).

    The copy is ``copy_bytes`` each way, many times the L2, so it measures DRAM; its rate counts bytes
    read plus bytes written. The matmuls are ``matmul_size``-cubed on random data (zeros run faster
    on some parts); a dtype the part or build cannot run is left out, and its datasheet figure stands.
    """
    dev = torch.device(device)
    rates: dict[str, float] = {}
    with torch.cuda.device(dev):
        copy_rate = _copy_bytes_per_s(dev, copy_bytes, repeats)
        previous_tf32 = torch.backends.cuda.matmul.allow_tf32
        for key, dtype, tf32 in _MATMULS:
            try:
                torch.backends.cuda.matmul.allow_tf32 = tf32
                rates[key] = _matmul_flops_per_s(dev, dtype, matmul_size, repeats)
            except RuntimeError:  # includes torch.OutOfMemoryError: leave this dtype to the datasheet
                continue
            finally:
                torch.backends.cuda.matmul.allow_tf32 = previous_tf32
        torch.cuda.empty_cache()
    return Calibration(
        gpu_name=torch.cuda.get_device_name(dev),
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        copy_bytes_per_s=copy_rate,
        matmul_flops_per_s=rates,
        torch_version=torch.__version__,
        cuda_version=torch.version.cuda,
        driver_version=_driver_version(),
    )
