"""The doctor's checks on this machine (a CPU box with nvcc and ninja, no ncu), and the ones that never crash."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import triton

from openkernel.doctor import CHECKS, Check, Inputs, counters_check, run_checks
from openkernel.profile.ncu import PERMISSION_MESSAGE
from tests.conftest import HAS_GPU

FILE_KEY = "sk-canary-doctor-file-7731"
cpu_only = pytest.mark.skipif(HAS_GPU, reason="asserts what a machine without a GPU reports")


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A clean user under tmp_path; the environment run_checks is given (PATH kept)."""
    for name in list(os.environ):
        if name.startswith("KERNEL_CODE_") or name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                                                         "ANTHROPIC_BASE_URL", "TRITON_INTERPRET"):  # fmt: skip
            monkeypatch.delenv(name)
    for var, folder in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"),
                        ("XDG_CACHE_HOME", "cache")):  # fmt: skip
        monkeypatch.setenv(var, str(tmp_path / folder))
    monkeypatch.chdir(tmp_path)
    return dict(os.environ)


def _by_name(checks: tuple[Check, ...]) -> dict[str, Check]:
    return {c.name: c for c in checks}


@cpu_only
def test_this_cpu_machine(env: dict[str, str], tmp_path: Path) -> None:
    started = time.perf_counter()
    checks = run_checks(env)
    assert time.perf_counter() - started < 3.0
    assert [c.name for c in checks] == [name for name, _ in CHECKS]
    found = _by_name(checks)
    smi = "nvidia-smi not found" if shutil.which("nvidia-smi") is None else "nvidia-smi: none"
    assert found["gpu"] == Check(
        "gpu",
        "missing",
        f"no GPU: torch sees no CUDA device ({smi})",
        "run kernel-code on a machine with an NVIDIA GPU, its driver (nvidia-smi lists it) and a CUDA build of torch; "
        "here kernels are checked for correctness only",
    )
    assert found["torch"] == Check(
        "torch",
        "warn",
        f"{torch.__version__}, a CPU-only build (no CUDA)",
        "for GPU timings install a CUDA build: pip install torch --index-url https://download.pytorch.org/whl/cu128 "
        "(the CUDA version your driver supports)",
    )
    assert found["triton"] == Check("triton", "ok", triton.__version__, None)
    assert found["triton-interpreter"].status == "warn"
    assert found["triton-interpreter"].found.startswith("no GPU: Triton kernels run under TRITON_INTERPRET=1")
    v = sys.version_info
    assert found["python"] == Check("python", "ok", f"{v.major}.{v.minor}.{v.micro} ({sys.executable})", None)
    assert found["config"] == Check(
        "config", "ok", f"no config file (the user file would be {tmp_path}/config/kernel-code/config.toml)", None
    )
    assert found["calibration"] == Check(
        "calibration", "ok", f"no GPU here to calibrate; cached in {tmp_path}/cache/openkernel/calibration: none", None
    )
    assert found["openai"] == Check(
        "openai",
        "warn",
        "no API key; base URL the provider's own API",
        f"set OPENAI_API_KEY, or put api_key under [openai] in {tmp_path}/config/kernel-code/config.toml "
        "(not needed for --model offline or human)",
    )
    sessions = tmp_path / "data" / "kernel-code" / "sessions"
    assert found["sessions"] == Check(
        "sessions", "ok", f"{sessions} (not there yet; created on the first session), writable", None
    )
    if shutil.which("ncu") is None and not list(Path("/opt/nvidia").glob("nsight-compute/*/ncu")):
        assert found["ncu"] == Check(
            "ncu",
            "missing",
            "not found",
            "install Nsight Compute and put ncu on PATH (only kernel-code profile needs it)",
        )
    else:
        assert found["ncu"].found.endswith("; no GPU: counters cannot be read here")


def test_a_key_from_a_config_file_is_used_but_never_shown(env: dict[str, str], tmp_path: Path) -> None:
    user = tmp_path / "config" / "kernel-code" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text(f'[openai]\napi_key = "{FILE_KEY}"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "gpt-4.1"\n')
    user.chmod(0o644)
    checks = run_checks(env)
    assert FILE_KEY not in json.dumps([c.to_json() for c in checks])
    found = (f"key set (from user file {user}); base URL http://127.0.0.1:9/v1; default model gpt-4.1 "
             "(not tried: doctor makes no network calls)")  # fmt: skip
    assert _by_name(checks)["openai"] == Check("openai", "warn", f"{found}; the file is readable by others",
                                               f"chmod 600 {user}")  # fmt: skip
    user.chmod(0o600)
    assert _by_name(run_checks(env))["openai"] == Check("openai", "ok", found, None)
    assert _by_name(run_checks({**env, "ANTHROPIC_API_KEY": "sk-ant-env"}))["anthropic"] == Check(
        "anthropic", "ok", "key set (from ANTHROPIC_API_KEY); base URL the provider's own API "
        "(not tried: doctor makes no network calls)", None)  # fmt: skip


def test_a_bad_config_is_a_failing_check_and_the_rest_still_run(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "kernel-code.toml").write_text("[loop]\niterations = 0\n")
    checks = run_checks(env)
    assert checks[0] == Check(
        "config",
        "missing",
        "a config file or KERNEL_CODE_ variable is not usable",
        f"{tmp_path}/kernel-code.toml: [loop] iterations must be a whole number >= 1, not 0: "
        "write it like iterations = 10",
    )
    assert [c.name for c in checks] == [name for name, _ in CHECKS]
    # The rest ran on the defaults: the sessions home is the default one.
    assert _by_name(checks)["sessions"].found.startswith(f"{tmp_path}/data/kernel-code/sessions ")


def test_a_crashing_check_is_reported_as_failing(env: dict[str, str]) -> None:
    def broken(_inputs: Inputs) -> Check:
        raise KeyError("gpu_name")

    checks = run_checks(env, checks=[("broken", broken), CHECKS[1]])
    assert checks[0] == Check("broken", "missing", "the check crashed: KeyError: 'gpu_name'",
                              "this is a bug in kernel-code doctor; please report it")  # fmt: skip
    assert checks[1].name == "python" and checks[1].status == "ok"


def test_ninja_beside_python_but_not_on_path(env: dict[str, str], tmp_path: Path) -> None:
    venv_bin = Path(sys.executable).parent
    if not (venv_bin / "ninja").is_file():
        pytest.fail(f"the test virtualenv has no ninja in {venv_bin}: run make setup")
    checks = run_checks({**env, "PATH": str(tmp_path / "empty")}, checks=[c for c in CHECKS if c[0] == "ninja"])
    found = f"{venv_bin / 'ninja'}, not on PATH (torch's builds look for ninja on PATH)"
    assert checks == (Check("ninja", "warn", found, f"activate the virtualenv, or export PATH={venv_bin}:$PATH"),)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs the CUDA toolkit's nvcc")
def test_nvcc_under_cuda_home_but_not_on_path(env: dict[str, str], tmp_path: Path) -> None:
    real = shutil.which("nvcc")
    assert real is not None
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    (tmp_path / "cuda" / "bin" / "nvcc").symlink_to(real)
    printed = subprocess.run([real, "--version"], capture_output=True, text=True, check=True).stdout
    release = printed.strip().splitlines()[-2].split(", ", 1)[1]  # "Cuda compilation tools, release 13.0, V13.0.88"
    assert re.fullmatch(r"release [\d.]+, V[\d.]+", release)
    environ = {**env, "PATH": str(tmp_path / "empty"), "CUDA_HOME": str(tmp_path / "cuda")}
    checks = run_checks(environ, checks=[c for c in CHECKS if c[0] == "nvcc"])
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    assert checks == (Check("nvcc", "warn", f"{nvcc}, {release}, not on PATH", f"export PATH={nvcc.parent}:$PATH"),)


PARAMS_ADMIN_ONLY = "ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\nEnableMSI: 1\n"
PARAMS_OPEN = "ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 0\n"
CAP_SYS_ADMIN = 1 << 21
CAP_PERFMON = 1 << 38
TOOL = "/opt/nvidia/nsight-compute/2025.3.1/ncu, 2025.3.1.0"


@pytest.mark.parametrize(
    ("params", "caps", "euid", "expected"),
    [
        (PARAMS_OPEN, 0, 1000,
         Check("ncu", "ok", f"{TOOL}; counters readable by every user (RmProfilingAdminOnly: 0)", None)),
        (PARAMS_ADMIN_ONLY, 0, 0,
         Check("ncu", "ok", f"{TOOL}; counters are admin-only, and this process has root", None)),
        (PARAMS_ADMIN_ONLY, CAP_PERFMON, 1000,
         Check("ncu", "ok", f"{TOOL}; counters are admin-only, and this process has CAP_PERFMON", None)),
        (PARAMS_ADMIN_ONLY, CAP_SYS_ADMIN | 0xFF, 1000,
         Check("ncu", "ok", f"{TOOL}; counters are admin-only, and this process has CAP_SYS_ADMIN", None)),
        (PARAMS_ADMIN_ONLY, 0xFF, 1000,
         Check("ncu", "missing",
               f"{TOOL}; counters are admin-only (RmProfilingAdminOnly: 1) and this process is not privileged",
               PERMISSION_MESSAGE + "; or an admin sets NVreg_RestrictProfilingToAdminUsers=0 for the nvidia module")),
        (None, 0, 1000,
         Check("ncu", "warn",
               f"{TOOL}; whether it may read the counters is unknown "
               "(no RmProfilingAdminOnly in /proc/driver/nvidia/params)",
               "run kernel-code profile once: it names ERR_NVGPUCTRPERM when the counters are not readable")),
    ],
)  # fmt: skip
def test_whether_ncu_may_read_the_counters(params: str | None, caps: int, euid: int, expected: Check) -> None:
    assert counters_check("/opt/nvidia/nsight-compute/2025.3.1/ncu", "2025.3.1.0", params, caps, euid) == expected


def test_a_file_where_the_sessions_folder_should_be(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("")
    checks = run_checks({**env, "KERNEL_CODE_SESSIONS_HOME": str(tmp_path / "taken")},
                        checks=[c for c in CHECKS if c[0] == "sessions"])  # fmt: skip
    assert checks == (Check("sessions", "missing", f"{tmp_path / 'taken'} is not a folder",
                            "move it away, or set [sessions] home"),)  # fmt: skip
