"""``kernel-code replay`` and ``--model replay:SESSION`` end to end: a session recorded on the CPU with the
real evaluator, replayed by a real ``kernel-code`` process; the new session on disk and the printed table."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from kernel_code.cli import main
from kernel_code.replay_cmd import comparison_table
from openkernel.critic import Diagnosis
from openkernel.events import Decision, DiagnosisMade, EvaluationFinished, Event, KernelProposed, SessionFinished
from openkernel.generate.replay import ReplayRow
from openkernel.store import DirectoryStore
from tests.conftest import ROOT
from tests.llm_fakes import FakeServer, openai_events, sse
from tests.recorded import BROKEN, HONEST, record

EXE = [sys.executable, "-c", "import sys; from kernel_code.cli import main; sys.exit(main())"]
SESSION_ID = "20260101-120000-softmax_fp32-ab12"
CRITIC_KEY = "sk-canary-critic-cli-77"  # must never reach the session's files
H200 = "cuda:0 (NVIDIA H200)"  # the recorded session says it ran there; the replay runs on this CPU


@dataclass(frozen=True)
class Recorded:
    data_home: Path  # XDG_DATA_HOME: the session lives under kernel-code/sessions/SESSION_ID
    path: Path
    events: list[Event]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    data_home = tmp_path_factory.mktemp("data")
    path = data_home / "kernel-code" / "sessions" / SESSION_ID
    return Recorded(data_home, path, record(path, device=H200))


def _run(args: list[str], data_home: Path, **more_env: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_DATA_HOME": str(data_home), "COLUMNS": "200", **more_env}
    return subprocess.run([*EXE, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600, check=False)


def _table_rows(stdout: str) -> list[list[str]]:
    """The body rows of the comparison table: the cells between the box's vertical bars."""
    rows = []
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if line.lstrip().startswith("│") and cells[0].isdigit():
            rows.append(cells)
    return rows


def test_replay_by_session_id_prints_the_comparison(recorded: Recorded, tmp_path: Path) -> None:
    new = tmp_path / "new"
    proc = _run(["replay", SESSION_ID, "--headless", "--session-dir", str(new)], recorded.data_home)
    assert proc.returncode == 0, proc.stderr
    events = DirectoryStore.open(new).read_events().events
    proposed = [e for e in events if isinstance(e, KernelProposed)]
    assert [p.intent for p in proposed] == ["replay #0: one row per program", "replay #1: forgot a parenthesis"]
    assert [(new / p.kernel_file).read_text() for p in proposed] == [HONEST, BROKEN]
    old_results = [e.result_json for e in recorded.events if isinstance(e, EvaluationFinished)]
    new_results = [e.result_json for e in events if isinstance(e, EvaluationFinished)]
    assert [r["status"] for r in new_results] == [r["status"] for r in old_results] == ["correct", "compile_error"]
    assert [(d.iteration, d.decision) for d in events if isinstance(d, Decision)] == [(0, "keep"), (1, "error")]
    finished = events[-1]
    assert isinstance(finished, SessionFinished)
    reason = "replay finished: 2 recorded kernels re-evaluated (1 iteration without a kernel skipped)"
    assert finished.reason == reason
    store = DirectoryStore.open(new)
    assert (store.config.model, store.config.size, store.config.max_iterations) == (
        f"replay:{recorded.path}",
        "small",
        None,
    )
    lines = proc.stdout.splitlines()
    assert lines[0] == f"replaying session {SESSION_ID}: 2 recorded kernels; 1 iteration without a kernel skipped (#2)"
    best = new_results[0]["speedup"]
    shown = f"{best:.2f}x" if best >= 0.01 else f"{best:.3g}x"  # the interpreter's tiny ratios keep their digits
    assert f"finished: {reason} · best {shown} (iteration 0)" in lines
    warning = "recorded on cuda:0 (NVIDIA H200), re-timed on cpu (Triton interpreter): times are not comparable"
    assert lines[lines.index(warning) - 1].startswith("finished: ")  # right above the table
    old_ms, new_ms = old_results[0]["runtime_ms"], new_results[0]["runtime_ms"]
    assert _table_rows(proc.stdout) == [
        ["0", "one row per program", "correct", f"{old_ms:.4g}", f"{old_results[0]['speedup']:.3g}x", "correct",
         f"{new_ms:.4g}", f"{new_results[0]['speedup']:.3g}x", "—"],  # not compared: "recorded on the H200"
        ["1", "forgot a parenthesis", "compile_error", "—", "—", "compile_error", "—", "—", "—"],
    ]  # fmt: skip


def test_optimize_with_model_replay_and_an_llm_critic(recorded: Recorded, tmp_path: Path) -> None:
    answer = {
        "bottleneck": None,
        "summary": "Correct, but the interpreter's time says nothing about the GPU.",
        "next_steps": [{"title": "Time it on a GPU", "why": "no GPU timing", "expected_effect": "a real number"}],
    }
    server = FakeServer([sse(openai_events([json.dumps(answer)]))])
    server.start()
    new = tmp_path / "new"
    try:
        proc = _run(
            ["optimize", "softmax_fp32", "--model", f"replay:{recorded.path}", "--headless", "--session-dir", str(new),
             "--critic", "openai:gpt-4o", "--critic-base-url", server.root + "/v1"],
            tmp_path,  # another data home: the recorded session is found by its path
            OPENAI_API_KEY=CRITIC_KEY,
        )  # fmt: skip
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    events = DirectoryStore.open(new).read_events().events
    statuses = [e.result_json["status"] for e in events if isinstance(e, EvaluationFinished)]
    assert statuses == ["correct", "compile_error"]
    reason = "replay finished: 2 recorded kernels re-evaluated (1 iteration without a kernel skipped)"
    assert f"finished: {reason} · " in proc.stdout
    diagnoses = [Diagnosis.from_json(e.diagnosis_json) for e in events if isinstance(e, DiagnosisMade)]
    assert [(d.critic, d.lead, d.note) for d in diagnoses] == [
        ("openai:gpt-4o", "Correct, but the interpreter's time says nothing about the GPU", None)
    ] * 2
    assert len(server.requests) == 2
    files = [path for path in new.rglob("*") if path.is_file()]
    assert [path for path in files if CRITIC_KEY in path.read_text(errors="replace")] == []


def test_an_unknown_critic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "optimize",
        "softmax_fp32",
        "--model",
        "human",
        "--critic",
        "gemini:pro",
        "--session-dir",
        str(tmp_path / "s"),
    ]
    assert _error(argv, capsys) == (
        "kernel-code: error: unknown critic 'gemini:pro': use rule (default), openai:MODEL or anthropic:MODEL "
        "(falls back to the rules when the model fails)\n"
    )
    assert not (tmp_path / "s").exists()  # checked before a session is made


def test_comparison_table_renders_the_rows() -> None:
    rows = (
        ReplayRow(0, "tile rows", "correct", 0.2, 1.5, "correct", 0.15, 2.0, -25.0),
        ReplayRow(3, None, "correct", 0.000123456, 0.000392, "timeout", None, None, None),
    )
    console = Console(file=io.StringIO(), width=200)
    console.print(comparison_table(rows))
    assert _table_rows(console.file.getvalue()) == [
        ["0", "tile rows", "correct", "0.2", "1.5x", "correct", "0.15", "2x", "-25.0%"],
        ["3", "—", "correct", "0.0001235", "0.000392x", "timeout", "—", "—", "—"],
    ]


# --- what cannot be replayed: one line, exit code 2 ----------------------------------------------


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    return err


def test_replay_of_a_missing_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    err = _error(["replay", str(missing), "--headless"], capsys)
    assert err.startswith(f"kernel-code: error: no recorded session '{missing}': pass a session directory, or a ")


def test_replay_of_a_session_without_kernels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from openkernel.generate.base import Proposal

    record(tmp_path / "empty", (Proposal(None, "", "no", None, "the reply had no code block"),))
    err = _error(["replay", str(tmp_path / "empty"), "--session-dir", str(tmp_path / "new")], capsys)
    assert err == (
        f"kernel-code: error: cannot replay {tmp_path / 'empty'}: it recorded no kernels (1 iteration, none with "
        "code); pick another session with `kernel-code sessions`\n"
    )
    assert not (tmp_path / "new").exists()  # nothing was started


def test_model_replay_on_another_problem(
    recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["optimize", "matmul_fp32", "--headless", "--model", f"replay:{recorded.path}",
            "--session-dir", str(tmp_path / "n")]  # fmt: skip
    assert _error(argv, capsys) == (
        f"kernel-code: error: session {SESSION_ID} was recorded on problem 'softmax_fp32', not 'matmul_fp32': "
        f"run `kernel-code replay {recorded.path}`, or name that problem\n"
    )
    argv = ["optimize", "softmax_fp32", "--headless", "--model", "replay", "--session-dir", str(tmp_path / "m")]
    assert _error(argv, capsys) == (
        "kernel-code: error: --model replay: name the session, as in --model replay:SESSION (a directory or an id)\n"
    )
    # A refused model leaves no empty session behind.
    assert not (tmp_path / "n").exists() and not (tmp_path / "m").exists()
