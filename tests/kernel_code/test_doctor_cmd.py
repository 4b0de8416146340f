"""``kernel-code doctor``: rendered through main(), and once through the installed console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernel_code.cli import main
from openkernel.doctor import CHECKS
from tests.conftest import HAS_GPU, ROOT

FILE_KEY = "sk-canary-doctor-cmd-8086"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("KERNEL_CODE_") or name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                                                         "ANTHROPIC_BASE_URL"):  # fmt: skip
            monkeypatch.delenv(name)
    for var, folder in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"),
                        ("XDG_CACHE_HOME", "cache")):  # fmt: skip
        monkeypatch.setenv(var, str(tmp_path / folder))
    monkeypatch.chdir(tmp_path)
    user = tmp_path / "config" / "kernel-code" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text(f'[anthropic]\napi_key = "{FILE_KEY}"\n')
    user.chmod(0o600)
    return tmp_path


@pytest.mark.skipif(HAS_GPU, reason="asserts what a machine without a GPU reports")
def test_text_report(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert FILE_KEY not in out
    lines = out.splitlines()
    width = max(len(name) for name, _ in CHECKS)
    pad = " " * (10 + width)
    gpu = lines.index(next(line for line in lines if line.startswith("missing gpu ")))
    assert lines[gpu + 1] == (
        f"{pad}fix: run kernel-code on a machine with an NVIDIA GPU, its driver (nvidia-smi lists it) and a CUDA "
        "build of torch; here kernels are checked for correctness only"
    )
    user = home / "config" / "kernel-code" / "config.toml"
    assert f"{'ok':<8}{'anthropic':<{width}}  key set (from user file {user}); base URL the provider's own API " \
           "(not tried: doctor makes no network calls)" in lines  # fmt: skip
    assert f"{'warn':<8}{'torch':<{width}}  {torch.__version__}, a CPU-only build (no CUDA)" in lines
    statuses = [line.split()[0] for line in lines[:-1] if not line.startswith(pad)]
    assert len(statuses) == len(CHECKS)
    assert lines[-1] == ", ".join(f"{statuses.count(s)} {s}" for s in ("ok", "warn", "missing"))


def test_the_console_script_prints_one_json_object(home: Path) -> None:
    script = Path(sys.executable).parent / "kernel-code"
    proc = subprocess.run([str(script), "doctor", "--json"], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ), timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert FILE_KEY not in proc.stdout + proc.stderr
    [line] = proc.stdout.splitlines()
    checks = {c["name"]: c for c in json.loads(line)["checks"]}
    assert list(checks) == [name for name, _ in CHECKS]
    assert checks["torch"]["found"].startswith(torch.__version__ + ("," if torch.version.cuda is None else " "))
    assert checks["anthropic"]["status"] == "ok"
    assert checks["sessions"]["found"].startswith(str(home / "data" / "kernel-code" / "sessions"))
