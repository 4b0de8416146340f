"""``kernel-code eval``: the contract other tools depend on, driven as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import KERNELS, ROOT, SOLUTIONS

EXE = [sys.executable, "-c", "import sys; from kernel_code.cli import main; sys.exit(main())"]
REQUIRED_KEYS = {
    "status",
    "reasons",
    "device",
    "timing_valid",
    "runtime_ms",
    "reference_runtime_ms",
    "speedup",
}


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)


def test_json_is_exactly_one_object_with_the_contract_keys() -> None:
    proc = _run("eval", "softmax_fp32", str(SOLUTIONS / "softmax_fp32.py"), "--json")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert result.keys() >= REQUIRED_KEYS
    assert result["status"] == "correct"
    assert result["reasons"] == ["all checks passed"]
    assert result["timing_valid"] is False
    assert result["device"] == "cpu (Triton interpreter)"
    assert isinstance(result["runtime_ms"], float) and isinstance(result["speedup"], float)
    # The roofline of what ran (64 x 781 fp32 at the small size) against the default target, the H200.
    elements = 64 * 781
    profile = result["profile"]
    assert (profile["flops"], profile["min_bytes"]) == (5 * elements, 2 * 4 * elements)  # softmax: 5 FLOP/element
    assert profile["arithmetic_intensity"] == 5 * elements / (8 * elements)
    assert profile["sol_time_ms"] == 8 * elements / 4.8e12 * 1e3  # memory term at the H200's datasheet bandwidth
    assert (profile["bottleneck"], profile["headroom"], profile["measured_time_ms"]) == (None, None, None)
    # The critic does not pretend: no GPU profile, no bottleneck, dashes in the headline.
    diagnosis = result["diagnosis"]
    assert diagnosis["headline"] == "Bottleneck: — · Bandwidth: — · L2 hit: — · Occupancy: — · Headroom: —"
    assert diagnosis["bottleneck"] is None
    assert diagnosis["evidence"][0].endswith("is not a GPU timing of the target (the interpreter, or another GPU), "
                                             "so it says nothing about the bottleneck")  # fmt: skip


def test_a_failing_kernel_is_a_verdict_with_exit_code_zero() -> None:
    proc = _run("eval", "softmax_fp32", str(KERNELS / "raises_in_forward.py"), "--json")
    assert proc.returncode == 0
    result = json.loads(proc.stdout)
    assert (result["status"], result["reasons"][0]) == ("runtime_error", "RuntimeError in forward: boom")
    assert (result["runtime_ms"], result["speedup"]) == (None, None)


def test_readable_summary_without_json() -> None:
    proc = _run("eval", "softmax_fp32", str(KERNELS / "no_kernel_torch.py"))
    assert proc.returncode == 0
    assert "rejected" in proc.stdout
    assert "no custom kernel ran during forward()" in proc.stdout


def test_timeout_bounds_a_hanging_candidate() -> None:
    started = time.monotonic()
    proc = _run("eval", "softmax_fp32", str(KERNELS / "hang.py"), "--json", "--timeout", "4")
    elapsed = time.monotonic() - started
    assert proc.returncode == 0
    result = json.loads(proc.stdout)
    assert result["status"] == "timeout"
    assert result["reasons"][0].startswith("timed out after 4 s")
    assert elapsed < 4 + 40  # the reference and process start-up, not the hang


def test_bad_usage_is_one_clear_line(tmp_path: Path) -> None:
    missing = _run("eval", "softmax_fp32", str(tmp_path / "nope.py"))
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"kernel-code: error: candidate file {tmp_path / 'nope.py'} does not exist"
    ]

    no_model = tmp_path / "problem.py"
    no_model.write_text("def get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n")
    bad = _run("eval", str(no_model), str(SOLUTIONS / "softmax_fp32.py"))
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        f"kernel-code: error: {no_model} is not a KernelBench problem: it does not define Model "
        "(a problem defines class Model(nn.Module), get_inputs() and get_init_inputs())"
    ]

    unknown = _run("eval", "softmax_fp32", str(SOLUTIONS / "softmax_fp32.py"), "--fast")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        "kernel-code: error: unrecognized arguments: --fast (see kernel-code --help)"
    ]


KB_RELU = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

batch_size = 4096
dim = 393216

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []
"""


def test_kernelbench_id_with_sizes_set_on_the_command_line(tmp_path: Path) -> None:
    level = tmp_path / "KernelBench" / "level1"
    level.mkdir(parents=True)
    (level / "19_ReLU.py").write_text(KB_RELU)  # KernelBench's file layout and size, unchanged
    proc = _run(
        "eval", "L1#19", str(ROOT / "tests" / "fixtures" / "relu_triton.py"), "--kernelbench", str(tmp_path),
        "--set", "batch_size=16", "--set", "dim=1000", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["problem"], result["status"], result["size"]) == ("L1#19", "correct", "full batch_size=16 dim=1000")
    # torch.rand is non-negative, so ReLU is the identity on it: the evaluator says the problem is weak.
    assert result["warnings"] == [
        "weak problem: returning the input unchanged would pass its check; make get_inputs() give real spread"
    ]


def test_a_bad_size_assignment_is_one_line() -> None:
    proc = _run("eval", "softmax_fp32", str(SOLUTIONS / "softmax_fp32.py"), "--set", "dim=big")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "kernel-code eval: error: argument --set: 'dim=big': 'big' is not a number (see kernel-code eval --help)"
    ]
