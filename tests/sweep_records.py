"""A sweep record written entry by entry, as a driver on GPUs would have: for the summary, the CLI's
``--summary`` and the dashboard's sweep page (no Ray needed)."""

from __future__ import annotations

from pathlib import Path

from openkernel.events import SessionConfig
from openkernel.launch import SessionPlan
from openkernel.problems import load_problem
from openkernel.sweeps import (
    AttemptFailed,
    AttemptFinished,
    AttemptSubmitted,
    SessionOutcome,
    SweepEntry,
    SweepFinished,
    SweepRecord,
    SweepStarted,
    sweeps_home,
)

SWEEP_ID = "20261130-120000-abcd"
PLAN = SessionPlan(SessionConfig("triton", "openai:gpt-4o", "full", 5, None, None, None), 300.0)
GPU = "cuda:0 (NVIDIA H200)"
SOFTMAX = SessionOutcome("iteration budget spent (5 of 5)", 5, 3, 2.5, True, 1000, 0.01, GPU)
ROW_SUM = SessionOutcome("iteration budget spent (5 of 5)", 5, 1, 1.2, True, 500, None, GPU)  # price unknown
KILLED = "The worker died unexpectedly while executing this task."
RAISED = "ConfigError: no API key for openai: set OPENAI_API_KEY or pass --model offline"


def entries(home: Path, complete: bool = True) -> list[SweepEntry]:
    """softmax_fp32 finishes at 2.5x; row_sum_fp32's worker dies, its retry finishes at 1.2x;
    log_softmax_fp32 raises. Sessions are named s-<problem>-<attempt> under ``home``."""
    names = ("softmax_fp32", "row_sum_fp32", "log_softmax_fp32")
    problems = tuple(load_problem(n) for n in names)
    d = {(n, a): str(home / f"s-{n}-{a}") for n in names for a in (1, 2)}
    out: list[SweepEntry] = [
        SweepStarted(SWEEP_ID, 1.0, problems, PLAN, "10.0.0.5:6379", 1.0, 2, str(home)),
        *(AttemptSubmitted(SWEEP_ID, 2.0, n, 1, d[n, 1], "1 GPU") for n in names),
        AttemptFailed(SWEEP_ID, 3.0, "log_softmax_fp32", 1, d["log_softmax_fp32", 1], "raised", RAISED, False),
        AttemptFailed(SWEEP_ID, 4.0, "row_sum_fp32", 1, d["row_sum_fp32", 1], "worker died", KILLED, True),
        AttemptSubmitted(SWEEP_ID, 4.5, "row_sum_fp32", 2, d["row_sum_fp32", 2], "1 GPU"),
        AttemptFinished(SWEEP_ID, 5.0, "softmax_fp32", 1, d["softmax_fp32", 1], SOFTMAX),
        AttemptFinished(SWEEP_ID, 6.0, "row_sum_fp32", 2, d["row_sum_fp32", 2], ROW_SUM),
    ]
    if complete:
        out.append(SweepFinished(SWEEP_ID, 7.0, 2, 1))
    return out


def write_record(home: Path, complete: bool = True) -> Path:
    """The record of :func:`entries` in ``<home>/.sweeps/<SWEEP_ID>``."""
    folder = sweeps_home(home) / SWEEP_ID
    folder.mkdir(parents=True)
    (folder / "sweep.jsonl").touch()
    record = SweepRecord(folder)
    for entry in entries(home, complete):
        record.append(entry)
    return folder
