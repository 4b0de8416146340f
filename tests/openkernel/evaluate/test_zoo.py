"""The adversarial zoo: every attack in EVAL_INTEGRITY.md gets the verdict it must get.

Each file under tests/kernels/ declares, in its header, the problem it targets, the verdict it
must receive and a phrase the verdict's reasons must contain. Honest controls (expect: correct)
guard against false alarms.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from openkernel import EvalConfig, EvalStatus, evaluate_candidate, load_problem
from openkernel.evaluate.process import LOG_HEAD_BYTES, LOG_TAIL_BYTES
from tests.conftest import HAS_GPU, KERNELS

CHILD_PID_FILE = Path("/tmp/openkernel-zoo-children.pid")


@dataclass(frozen=True)
class Case:
    path: Path
    problem: str
    expect: tuple[str, ...]
    reason: tuple[str, ...]
    needs: str


def _read_case(path: Path) -> Case:
    text = path.read_text()
    fields = dict(re.findall(r"^# (problem|expect|reason|needs): ?(.*)$", text, re.MULTILINE))
    return Case(
        path=path,
        problem=fields["problem"].strip(),
        expect=tuple(fields["expect"].strip().split("|")),
        reason=tuple(r.strip() for r in fields.get("reason", "").split("|")),
        needs=fields.get("needs", "any").strip(),
    )


CASES = sorted((_read_case(p) for p in KERNELS.glob("*.py")), key=lambda c: c.path.name)


def _param(case: Case) -> object:
    marks = []
    if case.needs == "gpu" and not HAS_GPU:
        marks.append(pytest.mark.skip(reason="attack needs a CUDA GPU"))
    if case.needs == "cpu" and HAS_GPU:
        marks.append(pytest.mark.skip(reason="attack is for the CPU interpreter"))
    return pytest.param(case, id=case.path.stem, marks=marks)


def test_zoo_is_complete() -> None:
    """The attacks the issue names each have a kernel, and every kernel declares a valid verdict."""
    names = {c.path.stem for c in CASES}
    required = {
        "no_kernel_torch", "dummy_kernel_torch", "output_cache_shape", "input_mutation", "partial_write",
        "patch_clock", "patch_compare", "read_expected_gc", "fake_success_exit", "side_stream",
        "lowered_precision", "hang", "segfault", "child_left_running", "output_flood", "allocator_reuse",
    }  # fmt: skip
    assert required - names == set()
    statuses = {s.value for s in EvalStatus}
    assert [c.path.stem for c in CASES if not set(c.expect) <= statuses] == []


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_attack_gets_its_verdict(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    # A credential in the parent's environment must never reach the candidate (env_secrets.py checks).
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-0123456789abcdef")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "canary-token-value")
    CHILD_PID_FILE.unlink(missing_ok=True)
    hangs = case.expect == ("timeout",)
    config = EvalConfig(timeout_s=12.0 if hangs else 180.0, backend="cuda" if "cuda" in case.path.stem else "triton")
    result = evaluate_candidate(load_problem(case.problem), case.path, config)
    summary = f"{result.status.value}: {list(result.reasons)}"
    assert result.status.value in case.expect, summary
    if any(case.reason):
        assert any(r.lower() in " ".join(result.reasons).lower() for r in case.reason), summary
    if result.status is EvalStatus.CORRECT:
        assert result.reasons == ("all checks passed",)
        assert result.runtime_ms is not None and result.runtime_ms > 0
    else:
        assert result.runtime_ms is None and result.speedup is None
    # Bounded capture, whatever the candidate printed.
    assert len(result.log_tail.encode()) <= LOG_HEAD_BYTES + LOG_TAIL_BYTES + 200
    if case.path.stem == "output_flood":
        assert "bytes of output dropped" in result.log_tail
    spawned = {"child_left_running": 2, "child_clean_env": 1}  # processes each one leaves behind
    if case.path.stem in spawned:
        pids = [int(p) for p in CHILD_PID_FILE.read_text().split()]
        assert len(pids) == spawned[case.path.stem]
        assert [p for p in pids if _alive(p)] == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"  # a zombie is dead, just not yet reaped
    except OSError:
        return False
