"""How a sweep runs on Ray (:class:`SweepConfig`), and where sweep records live.

A sweep's record is a folder ``<sessions home>/.sweeps/<sweep id>/`` holding ``sweep.jsonl``: inside
the session store, so that one shared folder carries both the sessions and the sweeps that made them
(a cluster's nodes and the dashboard need only that one path), and hidden, so that session listings
(``kernel-code sessions``, the dashboard's sessions page), which list every folder of the home, do
not take it for a session.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from openkernel.errors import ConfigError

__all__ = ["LOCAL", "MAX_RAY_DIR_CHARS", "SWEEPS_DIR", "SweepConfig", "find_sweep", "sweeps_home"]

SWEEPS_DIR = ".sweeps"
LOCAL = "local"  # SweepConfig.ray: start a Ray on this machine for the sweep, and stop it after
MAX_RAY_DIR_CHARS = 40  # Ray adds ~67 characters below a local Ray's folder for its sockets; the limit is 107


@dataclass(frozen=True)
class SweepConfig:
    """Where and how the sessions of a sweep run (the sessions' own settings are a ``SessionPlan``)."""

    ray: str = LOCAL  # "local", or a running cluster's address: "auto", "10.0.0.5:6379", "ray://head:10001"
    gpus_per_session: float = 1.0  # GPUs each session holds; 0, or a cluster without GPUs: one CPU slot
    max_attempts: int = 2  # tries per problem when its worker or node dies (a session that raises is not retried)
    kernelbench: Path | None = None  # a KernelBench checkout, for ids like L1#23 and levels like L1
    home: Path | None = None  # the sessions home (the shared session store); None: the settings'
    local_cpus: int | None = None  # CPU slots of a local Ray; None: this machine's cores
    ray_dir: Path | None = None  # a local Ray's files (sockets, logs, auth token); None: /tmp/kernel-code-ray-<uid>

    def __post_init__(self) -> None:
        if not self.gpus_per_session >= 0:
            raise ConfigError(f"--gpus-per-session must be 0 or more, not {self.gpus_per_session}")
        if self.max_attempts < 1:
            raise ConfigError(f"--max-attempts must be at least 1, not {self.max_attempts}")
        if self.local_cpus is not None and self.local_cpus < 1:
            raise ConfigError(f"--local-cpus must be at least 1, not {self.local_cpus}")
        if not self.ray.strip():
            raise ConfigError("--ray needs a cluster address, or 'local' to start a Ray on this machine")
        if self.ray_dir is not None and len(str(self.ray_dir)) > MAX_RAY_DIR_CHARS:
            raise ConfigError(
                f"{self.ray_dir} is too long for Ray's socket paths (at most {MAX_RAY_DIR_CHARS} characters): "
                "choose a shorter --ray-dir, such as /tmp/kc-ray"
            )


def sweeps_home(home: Path) -> Path:
    """The folder of every sweep recorded in the session store ``home``."""
    return home / SWEEPS_DIR


def find_sweep(spec: str | Path, home: Path) -> Path:
    """A sweep's folder from its path or its id under ``home``; ``ConfigError`` saying where it looked."""
    path = Path(spec).expanduser()
    for candidate in (path, sweeps_home(home) / str(spec)):
        if (candidate / "sweep.jsonl").is_file():
            return candidate
    raise ConfigError(f"no sweep {str(spec)!r}: give a sweep folder, or the id of one in {sweeps_home(home)}")
