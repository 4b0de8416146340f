"""How an evaluation runs: one frozen config, validated where it is built (CLI, config files)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from openkernel.errors import ConfigError

__all__ = ["EvalConfig", "default_cache_dir"]


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "openkernel"


@dataclass(frozen=True)
class EvalConfig:
    device: str = "auto"  # "auto" (a GPU when there is one), "cpu" or "cuda"
    backend: str = "triton"  # "triton" or "cuda"
    size: str = "auto"  # "full", "small", or "auto" (small without a GPU when the problem has one)
    timeout_s: float = 300.0  # the candidate's whole evaluation, import and build included
    reference_timeout_s: float = 600.0
    cuda_build_timeout_s: float = 240.0
    trials: int = 5  # correctness trials, each with fresh inputs and weights
    warmup: int | None = None  # timed-call warm-up; None: 5 on a GPU, 1 on the CPU
    samples: int | None = None  # timed calls; None: 50 on a GPU, 5 on the CPU
    checked_samples: int = 3  # timed calls whose outputs are also compared
    compile_baseline: bool = False  # also time torch.compile of the reference
    remeasure_above: float = 10.0  # a speedup above this is measured again in a fresh process
    # Module constants to set before get_inputs() (e.g. (("dim", 1024),)): sizes for a plain KernelBench
    # file that declares no SMALL_SIZES. Applied after the chosen size, so they win.
    size_overrides: tuple[tuple[str, int | float], ...] = ()
    cache_dir: Path = field(default_factory=default_cache_dir)
    hardware: str | None = None  # the roofline's target GPU without one here ("H200"); default H200

    def __post_init__(self) -> None:
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ConfigError(f"unknown device {self.device!r}: use auto, cpu or cuda")
        if self.backend not in ("triton", "cuda"):
            raise ConfigError(f"unknown backend {self.backend!r}: use triton or cuda")
        if self.size not in ("auto", "full", "small"):
            raise ConfigError(f"unknown size {self.size!r}: use auto, full or small")
        if not self.timeout_s > 0:
            raise ConfigError(f"--timeout must be a positive number of seconds, not {self.timeout_s}")
        if self.trials < 1:
            raise ConfigError("at least one correctness trial is needed (KernelBench uses 5)")
        if self.samples is not None and self.samples < 1:
            raise ConfigError("samples must be at least 1")
