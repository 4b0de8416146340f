"""What this machine has for kernel work, and for whatever is missing, the exact fix.

``run_checks`` returns data (one :class:`Check` per item); ``kernel-code doctor`` renders it. The
checks are quick by design: no network call (a provider's key is reported as set or not, never tried),
no kernel run, no ncu profile (whether ncu may read the GPU's counters is read from the driver's
parameters), only ``--version``-style subprocesses with a short timeout. A check that crashes is that
check failing, reported like any other; ``run_checks`` itself never raises.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from openkernel.errors import ConfigError
from openkernel.settings import Settings, default_settings, load_settings, user_config_path

__all__ = ["CHECKS", "Check", "Inputs", "counters_check", "run_checks"]

Status = Literal["ok", "warn", "missing"]
TOOL_TIMEOUT_S = 5.0  # the longest a `--version` (or nvidia-smi) may take before it counts as broken
NVIDIA_PARAMS = Path("/proc/driver/nvidia/params")  # the loaded driver's module parameters
# Linux capabilities that let a non-root process read the GPU counters (CAP_PERFMON from driver R565),
# as NVIDIA's ERR_NVGPUCTRPERM page says; bit numbers from linux/capability.h.
CAP_SYS_ADMIN_BIT = 21
CAP_PERFMON_BIT = 38


@dataclass(frozen=True)
class Check:
    name: str  # "torch", "gpu", "ncu", ...
    status: Status
    found: str  # what is here, one line
    fix: str | None  # for "warn" and "missing": what to do, one line; None when ok

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Inputs:
    """What the checks read: the settings (defaults when the config cannot be read) and the environment."""

    settings: Settings
    settings_error: str | None  # the ConfigError's line when a config file or variable is bad
    environ: Mapping[str, str]


def _run(argv: list[str]) -> str | None:
    """stdout and stderr of a quick command; None when it does not start, fails or times out."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout + done.stderr).strip() if done.returncode == 0 else None


@functools.cache
def _torch_gpus() -> tuple[str, ...]:
    """The names of the CUDA devices torch sees; none when torch or the driver will not say."""
    try:
        import torch

        if not torch.cuda.is_available():
            return ()
        return tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    except Exception:  # no torch, a CPU build, a driver that will not start: no GPU for us
        return ()


_NO_GPU_FIX = (
    "run kernel-code on a machine with an NVIDIA GPU, its driver (nvidia-smi lists it) and a CUDA build of torch; "
    "here kernels are checked for correctness only"
)


# ------------------------------------------------------------------------------------------- checks


def _config(inputs: Inputs) -> Check:
    if inputs.settings_error is not None:
        return Check("config", "missing", "a config file or KERNEL_CODE_ variable is not usable", inputs.settings_error)
    files = ", ".join(str(p) for p in inputs.settings.files)
    found = f"read {files}" if files else f"no config file (the user file would be {user_config_path(inputs.environ)})"
    return Check("config", "ok", found, None)


def _python(_inputs: Inputs) -> Check:
    version = ".".join(str(n) for n in sys.version_info[:3])  # 3.11 or newer: the package requires it
    return Check("python", "ok", f"{version} ({sys.executable})", None)


def _torch(_inputs: Inputs) -> Check:
    try:
        import torch
    except ImportError:
        return Check("torch", "missing", "not installed", "pip install torch (a CUDA build on a GPU machine)")
    if torch.version.cuda is None:
        return Check(
            "torch",
            "warn",
            f"{torch.__version__}, a CPU-only build (no CUDA)",
            "for GPU timings install a CUDA build: pip install torch --index-url "
            "https://download.pytorch.org/whl/cu128 (the CUDA version your driver supports)",
        )
    return Check("torch", "ok", f"{torch.__version__} with CUDA {torch.version.cuda}", None)


def _nvidia_smi() -> list[str] | None:
    """``name, driver`` per GPU from nvidia-smi; None when it is absent or fails."""
    path = shutil.which("nvidia-smi")
    if path is None:
        return None
    text = _run([path, "--query-gpu=name,driver_version", "--format=csv,noheader"])
    return None if text is None else [line.strip() for line in text.splitlines() if line.strip()]


def _gpu(_inputs: Inputs) -> Check:
    gpus = _torch_gpus()
    smi = _nvidia_smi()
    listed = "nvidia-smi not found" if smi is None else ("nvidia-smi: " + "; ".join(smi) if smi else "nvidia-smi: none")
    if gpus:
        return Check("gpu", "ok", f"{', '.join(gpus)} ({listed})", None)
    if smi:
        return Check(
            "gpu",
            "missing",
            f"torch sees no GPU, but {listed}",
            "install a CUDA build of torch that this driver supports (pip install torch --index-url "
            "https://download.pytorch.org/whl/cu128), or check CUDA_VISIBLE_DEVICES",
        )
    return Check("gpu", "missing", f"no GPU: torch sees no CUDA device ({listed})", _NO_GPU_FIX)


def _triton(_inputs: Inputs) -> Check:
    try:
        version = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return Check("triton", "missing", "not installed", "pip install 'kernel-code[triton]' (the triton backend)")
    return Check("triton", "ok", version, None)


def _interpreter(inputs: Inputs) -> Check:
    forced = inputs.environ.get("TRITON_INTERPRET", "") not in ("", "0")
    if not _torch_gpus():
        return Check(
            "triton-interpreter",
            "warn",
            "no GPU: Triton kernels run under TRITON_INTERPRET=1 (the evaluator sets it), which checks "
            "correctness but gives no GPU timings",
            "for real timings run on a machine with an NVIDIA GPU",
        )
    if forced:
        return Check(
            "triton-interpreter",
            "warn",
            "TRITON_INTERPRET is set: Triton kernels run in the interpreter even on the GPU",
            "unset TRITON_INTERPRET",
        )
    return Check("triton-interpreter", "ok", "not needed: Triton kernels run on the GPU", None)


def _nvcc(inputs: Inputs) -> Check:
    on_path = shutil.which("nvcc", path=inputs.environ.get("PATH"))
    homes = [inputs.environ.get("CUDA_HOME"), inputs.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    elsewhere = next((Path(h) / "bin" / "nvcc" for h in homes if h and (Path(h) / "bin" / "nvcc").is_file()), None)
    path = on_path or (str(elsewhere) if elsewhere else None)
    if path is None:
        return Check(
            "nvcc",
            "missing",
            "not found",
            "install the CUDA toolkit and put its bin folder on PATH (only the cuda backend needs nvcc)",
        )
    text = _run([path, "--version"])
    release = re.search(r"release [\d.]+, V[\d.]+", text or "")
    version = release.group(0) if release else "version unknown (nvcc --version failed)"
    if on_path is None:
        folder = Path(path).parent
        return Check("nvcc", "warn", f"{path}, {version}, not on PATH", f"export PATH={folder}:$PATH")
    return Check("nvcc", "ok", f"{path}, {version}", None)


def _ninja(inputs: Inputs) -> Check:
    path = shutil.which("ninja", path=inputs.environ.get("PATH"))
    beside = Path(sys.executable).parent / "ninja"
    if path is None and beside.is_file():
        return Check(
            "ninja",
            "warn",
            f"{beside}, not on PATH (torch's builds look for ninja on PATH)",
            f"activate the virtualenv, or export PATH={beside.parent}:$PATH",
        )
    if path is None:
        return Check("ninja", "missing", "not found", "pip install ninja (torch builds CUDA candidates with it)")
    text = _run([path, "--version"])
    return Check("ninja", "ok", f"{path}, {text or 'version unknown'}", None)


def counters_check(path: str, version: str | None, params: str | None, cap_eff: int | None, euid: int) -> Check:
    """Whether ncu may read the performance counters, from the driver's parameters and our privileges.

    ``params``: the text of /proc/driver/nvidia/params (None: unreadable); ``cap_eff``: the effective
    capability mask from /proc/self/status. ncu fails with ERR_NVGPUCTRPERM when the driver keeps the
    counters to admins (RmProfilingAdminOnly: 1) and this process is neither root nor privileged.
    """
    from openkernel.profile.ncu import PERMISSION_MESSAGE

    tool = f"{path}, {version or 'version unknown'}"
    match = re.search(r"^RmProfilingAdminOnly:\s*(\d+)", params or "", re.MULTILINE)
    if match is None:
        return Check(
            "ncu",
            "warn",
            f"{tool}; whether it may read the counters is unknown (no RmProfilingAdminOnly in {NVIDIA_PARAMS})",
            "run kernel-code profile once: it names ERR_NVGPUCTRPERM when the counters are not readable",
        )
    if match.group(1) == "0":
        return Check("ncu", "ok", f"{tool}; counters readable by every user (RmProfilingAdminOnly: 0)", None)
    caps = cap_eff or 0
    privileged = [n for n, bit in (("CAP_SYS_ADMIN", CAP_SYS_ADMIN_BIT), ("CAP_PERFMON", CAP_PERFMON_BIT))
                  if caps >> bit & 1]  # fmt: skip
    if euid == 0 or privileged:
        who = "root" if euid == 0 else " and ".join(privileged)
        return Check("ncu", "ok", f"{tool}; counters are admin-only, and this process has {who}", None)
    return Check(
        "ncu",
        "missing",
        f"{tool}; counters are admin-only (RmProfilingAdminOnly: 1) and this process is not privileged",
        PERMISSION_MESSAGE + "; or an admin sets NVreg_RestrictProfilingToAdminUsers=0 for the nvidia module",
    )


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _ncu(_inputs: Inputs) -> Check:
    from openkernel.profile.ncu import find_ncu, ncu_available

    path = find_ncu()
    if path is None:
        return Check(
            "ncu",
            "missing",
            "not found",
            "install Nsight Compute and put ncu on PATH (only kernel-code profile needs it)",
        )
    has_gpu = bool(_torch_gpus())
    status = ncu_available(gpu_check=lambda: None, ncu=path)  # runs `ncu --version` only
    if status.version is None:
        return Check("ncu", "missing", f"{path} does not run", status.reason)
    if not has_gpu:
        return Check(
            "ncu",
            "warn",
            f"{path}, {status.version}; no GPU: counters cannot be read here",
            "run kernel-code profile on a machine with an NVIDIA GPU",
        )
    mask = re.search(r"^CapEff:\s*([0-9a-fA-F]+)", _read(Path("/proc/self/status")) or "", re.MULTILINE)
    return counters_check(path, status.version, _read(NVIDIA_PARAMS), int(mask.group(1), 16) if mask else None,
                          os.geteuid())  # fmt: skip


def _calibration(_inputs: Inputs) -> Check:
    from openkernel.evaluate import default_cache_dir
    from openkernel.hardware import list_calibrations, load_calibration

    cache = default_cache_dir()
    try:
        cached = list_calibrations(cache)
    except ConfigError as err:
        return Check("calibration", "warn", f"a broken calibration under {cache}", str(err))
    names = ", ".join(f"{c.gpu_name} ({c.date[:10]})" for c in cached) or "none"
    gpus = _torch_gpus()
    missing = [g for g in gpus if load_calibration(g, cache) is None]
    if missing:
        return Check(
            "calibration",
            "warn",
            f"{', '.join(missing)} not calibrated (cached: {names}); the roofline uses datasheet figures",
            "kernel-code hardware --calibrate",
        )
    where = f"cached in {cache / 'calibration'}: {names}"
    return Check("calibration", "ok", where if gpus else f"no GPU here to calibrate; {where}", None)


def _provider(provider: str, variable: str) -> Callable[[Inputs], Check]:
    def check(inputs: Inputs) -> Check:
        settings = inputs.settings
        config = getattr(settings, provider)
        source = settings.sources[f"{provider}.api_key"]
        url = config.base_url or "the provider's own API"
        model = f"; default model {config.model}" if config.model else ""
        if config.api_key is None:
            return Check(
                provider,
                "warn",
                f"no API key; base URL {url}{model}",
                f"set {variable}, or put api_key under [{provider}] in {user_config_path(inputs.environ)} "
                "(not needed for --model offline or human)",
            )
        where = source.name if source.kind == "env" else str(source)
        found = f"key set (from {where}); base URL {url}{model} (not tried: doctor makes no network calls)"
        if source.kind in ("user file", "project file") and source.name is not None:
            mode = os.stat(source.name).st_mode
            if mode & (stat.S_IRGRP | stat.S_IROTH):
                return Check(provider, "warn", f"{found}; the file is readable by others", f"chmod 600 {source.name}")
        return Check(provider, "ok", found, None)

    return check


def _sessions(inputs: Inputs) -> Check:
    home = inputs.settings.sessions.home
    if home.exists() and not home.is_dir():
        return Check("sessions", "missing", f"{home} is not a folder", "move it away, or set [sessions] home")
    existing = next(p for p in (home, *home.parents) if p.exists())
    writable = os.access(existing, os.W_OK | os.X_OK)
    what = str(home) if existing == home else f"{home} (not there yet; created on the first session)"
    if not writable:
        return Check(
            "sessions",
            "missing",
            f"{what}: {existing} is not writable",
            f"make {existing} writable, or set [sessions] home (or KERNEL_CODE_SESSIONS_HOME) to a writable folder",
        )
    return Check("sessions", "ok", f"{what}, writable", None)


CheckFn = Callable[[Inputs], Check]
CHECKS: tuple[tuple[str, CheckFn], ...] = (
    ("config", _config),
    ("python", _python),
    ("torch", _torch),
    ("gpu", _gpu),
    ("triton", _triton),
    ("triton-interpreter", _interpreter),
    ("nvcc", _nvcc),
    ("ninja", _ninja),
    ("ncu", _ncu),
    ("calibration", _calibration),
    ("openai", _provider("openai", "OPENAI_API_KEY")),
    ("anthropic", _provider("anthropic", "ANTHROPIC_API_KEY")),
    ("sessions", _sessions),
)


def run_checks(
    environ: Mapping[str, str] | None = None, cwd: Path | None = None, checks: Sequence[tuple[str, CheckFn]] = CHECKS
) -> tuple[Check, ...]:
    """Every check, in order. Never raises: a crashing check is reported as that check failing."""
    env = dict(os.environ if environ is None else environ)
    try:
        inputs = Inputs(load_settings(env, cwd), None, env)
    except ConfigError as err:
        inputs = Inputs(default_settings(), str(err), env)
    results = []
    for name, check in checks:
        try:
            results.append(check(inputs))
        except Exception as err:
            crashed = f"the check crashed: {type(err).__name__}: {err}"
            results.append(Check(name, "missing", crashed, "this is a bug in kernel-code doctor; please report it"))
    return tuple(results)
