"""The driver ncu runs: imports like the candidate worker, runs the forward, and fails in one line.

Without a GPU it runs as a dry run (``--device cpu``, the Triton interpreter): no profiler markers,
the same imports, weights, inputs and calls.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from openkernel import load_problem
from tests.conftest import HAS_GPU, KERNELS, ROOT, SOLUTIONS


def _driver(candidate: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "openkernel.profile.ncu_driver",
        "--problem",
        str(load_problem("softmax_fp32").path),
        "--candidate",
        str(candidate),
        "--sizes",
        '[["batch_size", 8], ["dim", 33]]',
        "--cache-dir",
        str(tmp_path),
        *extra,
    ]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env, check=False)


def test_dry_run_of_an_honest_solution(tmp_path: Path) -> None:
    proc = _driver(SOLUTIONS / "softmax_fp32.py", tmp_path, "--device", "cpu", "--calls", "3")
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0,
        "openkernel.profile.ncu_driver: ran 3 profiled call(s) after 2 warm-up\n",
        "",
    )


def test_a_candidate_without_modelnew_fails_in_one_line(tmp_path: Path) -> None:
    proc = _driver(KERNELS / "no_modelnew.py", tmp_path, "--device", "cpu")
    assert (proc.returncode, proc.stderr) == (
        3,
        "openkernel.profile.ncu_driver: error: the candidate defines no class ModelNew "
        "(it must define class ModelNew(nn.Module))\n",
    )


def test_a_forward_that_raises_names_the_stage(tmp_path: Path) -> None:
    proc = _driver(KERNELS / "raises_in_forward.py", tmp_path, "--device", "cpu")
    assert (proc.returncode, proc.stderr) == (
        3,
        "openkernel.profile.ncu_driver: error: warm-up forward: RuntimeError: boom\n",
    )


@pytest.mark.skipif(HAS_GPU, reason="checks the machine without a GPU")
def test_without_a_gpu_the_profiled_run_says_so(tmp_path: Path) -> None:
    proc = _driver(SOLUTIONS / "softmax_fp32.py", tmp_path)
    assert (proc.returncode, proc.stderr) == (
        3,
        "openkernel.profile.ncu_driver: error: no CUDA GPU in the profiled process\n",
    )
