"""Connecting a sweep to Ray, and what each session task holds.

Ray is imported here, inside the functions, and nowhere else in the engine's import path: the tool
starts without paying for it (~1 s and 250 MB), and a machine without it runs everything but sweeps.

What a local Ray (``--ray local``) writes, and what we decide about it:

- its files (unix sockets, logs, the session's spill) go to ``ray_dir``, by default
  ``/tmp/kernel-code-ray-<uid>`` (mode 700) instead of Ray's ``/tmp/ray``. Short on purpose: Ray puts
  unix sockets under ``<dir>/session_<date>_<time>_<pid>/sockets/``, and a socket path longer than
  107 bytes cannot be bound, so the folder is kept out of ``$TMPDIR`` (long on some systems) and a
  longer one is refused (``SweepConfig``). Ray's logs stay there after the sweep (a dead worker's log is where its
  reason is); /tmp is cleared on reboot.
- token authentication: Ray 2.59+ turns it on for a local cluster unless ``RAY_AUTH_MODE`` says
  otherwise, and would write a token to ``~/.ray/auth_token``. We keep it on (a local cluster's GCS
  listens on the machine's address, and anyone who reaches it can run code), and put the token in
  ``<ray_dir>/auth_token`` (mode 600) through ``RAY_AUTH_TOKEN_PATH``, so nothing is written to the
  home. An explicit ``RAY_AUTH_MODE`` or ``RAY_AUTH_TOKEN`` of the user's is respected. Ray keeps the
  first token a process used, so one process uses one ``ray_dir``.
- usage statistics (``RAY_USAGE_STATS_ENABLED=0``) and the Ray dashboard are off.

A cluster (``--ray ADDRESS``) is the team's: we connect and disconnect, and change none of its files
or settings. Run it with ``RAY_AUTH_MODE=token``; this machine finds the token as Ray does
(``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``; ``ray get-auth-token``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openkernel.errors import ConfigError
from openkernel.sweeps.config import LOCAL, SweepConfig

__all__ = ["Cluster", "TaskResources", "connected", "default_ray_dir", "task_resources"]

_token_dir: list[Path] = []  # the ray_dir whose token this process has used (Ray caches it per process)


@dataclass(frozen=True)
class Cluster:
    address: str  # "local", or the address connected to
    cpus: float
    gpus: float
    ray_dir: Path | None  # a local Ray's files; None for a cluster


@dataclass(frozen=True)
class TaskResources:
    options: Mapping[str, float] = field(default_factory=dict)  # ray.remote options: num_cpus, num_gpus
    label: str = "1 CPU slot"  # what each session holds, for the record
    note: str | None = None  # said once when the sweep starts (sessions on CPU slots: no GPU timings)


def default_ray_dir() -> Path:
    return Path("/tmp") / f"kernel-code-ray-{os.getuid()}"  # not $TMPDIR: see the module docstring


def task_resources(gpus_per_session: float, cluster_gpus: float) -> TaskResources:
    """What each session task asks Ray for: ``gpus_per_session`` GPUs, or one CPU slot without GPUs."""
    if gpus_per_session > 0 and cluster_gpus >= gpus_per_session:
        count = f"{gpus_per_session:g} GPU{'s' if gpus_per_session != 1 else ''}"
        return TaskResources({"num_cpus": 1, "num_gpus": gpus_per_session}, count)
    if gpus_per_session > 0 and cluster_gpus > 0:
        raise ConfigError(
            f"the cluster has {cluster_gpus:g} GPUs, fewer than --gpus-per-session {gpus_per_session:g}: ask for fewer"
        )
    why = "no GPUs in the cluster" if gpus_per_session > 0 else "--gpus-per-session 0"
    note = f"{why}: each session runs on a CPU slot (correctness only, no GPU timings)"
    return TaskResources({"num_cpus": 1}, "1 CPU slot", note)


@contextlib.contextmanager
def connected(config: SweepConfig) -> Iterator[Cluster]:
    """Ray, for the sweep: a Ray this process already started is used as it is and left running; else a
    local one is started (and stopped after), or the cluster at ``config.ray`` joined (and left after)."""
    import ray

    if ray.is_initialized():
        yield _cluster(ray, "this process's Ray", None)
        return
    if config.ray == LOCAL:
        ray_dir = _prepare_local(config.ray_dir or default_ray_dir())
        try:
            ray.init(address="local", num_cpus=config.local_cpus, include_dashboard=False, _temp_dir=str(ray_dir),
                     log_to_driver=False, logging_level=logging.ERROR)  # fmt: skip
        except Exception as err:
            raise ConfigError(f"a local Ray did not start ({_first_line(err)}): its logs are in {ray_dir}") from None
        address, shown_dir = LOCAL, ray_dir
    else:
        try:
            ray.init(address=config.ray, log_to_driver=False, logging_level=logging.WARNING)
        except Exception as err:
            raise ConfigError(
                f"cannot join the Ray cluster at {config.ray} ({_first_line(err)}): "
                "start one with `ray start --head`, or pass --ray local"
            ) from None
        address, shown_dir = config.ray, None
    try:
        yield _cluster(ray, address, shown_dir)
    finally:
        ray.shutdown()


def _cluster(ray: Any, address: str, ray_dir: Path | None) -> Cluster:
    resources = ray.cluster_resources()
    return Cluster(address, float(resources.get("CPU", 0.0)), float(resources.get("GPU", 0.0)), ray_dir)


def _prepare_local(ray_dir: Path) -> Path:
    """Make ``ray_dir`` (mode 700) with its token (mode 600), and point Ray at them through the environment."""
    if _token_dir and _token_dir[0] != ray_dir:
        raise ConfigError(
            f"this process already ran a local Ray with its files in {_token_dir[0]}, and Ray keeps the first "
            f"token a process used: use that ray_dir again, not {ray_dir}"
        )
    ray_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    token = ray_dir / "auth_token"
    if not token.is_file():
        fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(secrets.token_hex(32))
    _token_dir[:] = [ray_dir]
    # Read by Ray here and by the processes it starts (they inherit this environment). Never a
    # session's: the evaluator's workers get an allow-list that drops anything named like a token.
    os.environ.setdefault("RAY_AUTH_TOKEN_PATH", str(token))
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    return ray_dir


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__
