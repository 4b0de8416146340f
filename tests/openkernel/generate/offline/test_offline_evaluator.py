"""Done when: every covered bundled problem's iteration-0 kernel passes the real evaluator (CPU, small size),
and ``kernel-code optimize --model offline`` runs a session whose decisions land on disk."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_code.models import ModelRequest, make_generator
from openkernel import EvalConfig, EvalStatus, evaluate_candidate, load_problem
from openkernel.errors import ConfigError
from openkernel.events import Decision, EvaluationFinished, KernelProposed
from openkernel.generate.base import Context
from openkernel.generate.offline import OfflineGenerator
from openkernel.store import DirectoryStore
from tests.conftest import ROOT

COVERED = [
    "gelu_scale_shift_fp32",
    "layernorm_fp32",
    "linear_bias_gelu_fp16",
    "log_softmax_fp32",
    "matmul_bf16",
    "matmul_fp32",
    "rmsnorm_bf16",
    "rmsnorm_fp16",
    "row_max_fp16",
    "row_sum_fp32",
    "softmax_bf16",
    "softmax_fp32",
    "swish_residual_fp16",
]
EXE = [sys.executable, "-c", "import sys; from kernel_code.cli import main; sys.exit(main())"]


@pytest.mark.parametrize("name", COVERED)
def test_the_first_offline_kernel_passes_the_evaluator(name: str, tmp_path: Path) -> None:
    problem = load_problem(name)
    source = problem.path.read_text()
    proposal = OfflineGenerator().propose(Context(0, name, source, "triton", None, None, (), None, None, (), None))
    assert proposal.error is None and proposal.source is not None
    candidate = tmp_path / "candidate.py"
    candidate.write_text(proposal.source)
    result = evaluate_candidate(problem, candidate, EvalConfig(size="small", samples=1, warmup=1))
    assert (result.status, result.reasons[:1]) == (EvalStatus.CORRECT, ("all checks passed",))
    assert all(c.ok for c in result.target_compiles)  # without a GPU: also compiled for sm_90


def test_offline_is_a_model_name_with_no_argument(tmp_path: Path) -> None:
    request = ModelRequest(load_problem("softmax_fp32"), tmp_path, "triton")
    assert isinstance(make_generator("offline", request), OfflineGenerator)
    with pytest.raises(ConfigError) as caught:
        make_generator("offline:fast", request)
    assert str(caught.value) == "--model offline takes no argument (got offline:fast): pass --model offline"


def test_optimize_with_the_offline_model_records_its_decisions(tmp_path: Path) -> None:
    session = tmp_path / "session"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_CODE_") and not k.endswith("_API_KEY")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")  # no user settings choose another model
    proc = subprocess.run(
        [*EXE, "optimize", "softmax_fp32", "--model", "offline", "--iterations", "2", "--headless",
         "--size", "small", "--session-dir", str(session)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    events = DirectoryStore.open(session).read_events().events
    proposed = [(e.iteration, e.intent) for e in events if isinstance(e, KernelProposed)]
    statuses = [e.result_json["status"] for e in events if isinstance(e, EvaluationFinished)]
    decisions = [(d.iteration, d.decision) for d in events if isinstance(d, Decision)]
    assert proposed == [
        (
            0,
            "softmax template, best guess: one row per program in registers, warps auto "
            "[row variant=one_pass BLOCK=auto warps=auto ROWS=1 persistent=no evict=none]",
        ),
        (
            1,
            "rows/program 1 -> 2 (small_problem: several rows per program amortise the fixed costs) "
            "[row variant=one_pass BLOCK=auto warps=auto ROWS=2 persistent=no evict=none]",
        ),
    ]
    assert statuses == ["correct", "correct"]
    # Iteration 1 is kept only if it is faster beyond the noise of CPU timings: either verdict is right.
    assert decisions in ([(0, "keep"), (1, "keep")], [(0, "keep"), (1, "discard")])
    best = 1 if decisions[1][1] == "keep" else 0
    assert (session / "best.py").read_text() == (session / "kernels" / f"iter_{best:04d}.py").read_text()
    assert "finished: iteration budget spent (2 of 2)" in proc.stdout
