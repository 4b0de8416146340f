"""``kernel-code sweep`` end to end on a real local Ray (CPU slots, the offline generator, small sizes):
a session finishes, one whose worker is SIGKILLed is retried into a new session, one raises; then
``--resume`` of a sweep that stopped; ``--summary`` and the usage errors without Ray."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openkernel.events import IterationStarted, SessionConfig, SessionFinished, SessionStarted
from openkernel.launch import SessionPlan
from openkernel.problems import load_problem
from openkernel.store import DirectoryStore, list_sessions
from openkernel.sweeps import (
    AttemptFailed,
    AttemptFinished,
    AttemptSubmitted,
    SweepEntry,
    SweepFinished,
    SweepRecord,
    SweepResumed,
    SweepStarted,
    outcome_of,
    summarise,
    sweeps_home,
)
from openkernel.sweeps.task import TEST_KILL_VAR
from tests.conftest import ROOT
from tests.sweep_records import write_record

EXE = [sys.executable, "-c", "import sys; from kernel_code.cli import main; sys.exit(main())"]
CANARY = "sk-canary-sweep-0123456789abcdef"
SMALL = ["--iterations", "1", "--size", "small", "--local-cpus", "2"]
RAY_TIMEOUT_S = 300  # a local Ray start and three small CPU sessions take ~20-45 s on two busy cores


@pytest.fixture
def ray_dir() -> Iterator[Path]:
    """A short folder for the local Ray's files (its socket paths must stay under 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="okr-", dir="/tmp"))
    yield path
    deadline = time.monotonic() + 30
    while _ray_processes(path) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = _ray_processes(path)
    shutil.rmtree(path, ignore_errors=True)
    assert left == [], f"Ray processes outlived the sweep: {left}"


def _ray_processes(ray_dir: Path) -> list[str]:
    """Command lines of live processes that belong to the Ray whose files are in ``ray_dir``."""
    found = subprocess.run(["pgrep", "-af", str(ray_dir)], capture_output=True, text=True, check=False).stdout
    return [line for line in found.splitlines() if "pgrep" not in line]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")  # warm compile caches
    return {**os.environ, "HOME": str(tmp_path / "user"), "XDG_CACHE_HOME": cache, "COLUMNS": "200",
            "KERNEL_CODE_SESSIONS_HOME": str(tmp_path / "sessions"), "OPENAI_API_KEY": CANARY, **extra}  # fmt: skip


def _by_problem(entries: tuple[SweepEntry, ...], problem: str) -> list[tuple[str, int, str]]:
    """(kind, attempt, cause or "") of each entry about ``problem``."""
    return [
        (e.kind, e.attempt, e.cause if isinstance(e, AttemptFailed) else "")
        for e in entries
        if isinstance(e, AttemptSubmitted | AttemptFinished | AttemptFailed) and e.problem == problem
    ]


def _no_canary(*folders: Path) -> None:
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file():
                assert CANARY not in path.read_text(errors="replace"), path


@pytest.mark.slow
@pytest.mark.timeout(RAY_TIMEOUT_S)
def test_a_sweep_on_a_local_ray_retries_a_killed_task_and_records_a_raising_one(tmp_path: Path, ray_dir: Path) -> None:
    gone = tmp_path / "gone_fp32.py"  # resolved, then removed before its task runs: the task raises
    shutil.copy(load_problem("row_sum_fp32").path, gone)
    proc = subprocess.Popen(
        [*EXE, "sweep", "softmax_fp32", "row_sum_fp32", str(gone), *SMALL, "--ray-dir", str(ray_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env=_env(tmp_path, **{TEST_KILL_VAR: "row_sum_fp32"}),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # printed before Ray starts, so before any task runs
        gone.unlink()
        rest, stderr = proc.communicate(timeout=RAY_TIMEOUT_S - 30)
    finally:
        proc.kill()  # a no-op once it has exited
    assert proc.returncode == 1, stderr  # one problem failed
    record_dir = next(sweeps_home(tmp_path / "sessions").iterdir())
    assert first.startswith(f"sweep {record_dir.name} in {record_dir} · 3 problems · offline · triton · 1 iteration")
    entries = SweepRecord.open(record_dir).read()
    assert isinstance(entries[0], SweepStarted) and isinstance(entries[-1], SweepFinished)
    assert (entries[-1].finished, entries[-1].failed) == (2, 1)
    assert _by_problem(entries, "softmax_fp32") == [("attempt_submitted", 1, ""), ("attempt_finished", 1, "")]
    assert _by_problem(entries, "row_sum_fp32") == [
        ("attempt_submitted", 1, ""),
        ("attempt_failed", 1, "worker died"),
        ("attempt_submitted", 2, ""),
        ("attempt_finished", 2, ""),
    ]
    assert _by_problem(entries, "gone_fp32") == [("attempt_submitted", 1, ""), ("attempt_failed", 1, "raised")]
    failed = {e.problem: e for e in entries if isinstance(e, AttemptFailed)}
    assert failed["row_sum_fp32"].reason.startswith("The worker died unexpectedly while executing this task")
    assert failed["row_sum_fp32"].retried and not failed["gone_fp32"].retried
    assert failed["gone_fp32"].reason == (
        f"ProblemNotFound: {gone} is not on this node: a sweep on a cluster needs its problem files at the "
        "same path on every node (a shared file system, or the same checkout)"
    )
    # The sessions are in the store as local ones are; the killed attempt's partial session stays.
    submitted = {(e.problem, e.attempt): Path(e.session_dir) for e in entries if isinstance(e, AttemptSubmitted)}
    listed = {
        s.path: (s.problem_name, s.finished, s.iterations_completed) for s in list_sessions(tmp_path / "sessions")
    }
    assert listed == {
        submitted["softmax_fp32", 1]: ("softmax_fp32", True, 1),
        submitted["row_sum_fp32", 1]: ("row_sum_fp32", False, 0),
        submitted["row_sum_fp32", 2]: ("row_sum_fp32", True, 1),
    }  # gone_fp32's task raised before its session began
    killed = DirectoryStore.open(submitted["row_sum_fp32", 1]).read_events().events
    assert [type(e) for e in killed] == [SessionStarted, IterationStarted]
    finished = {e.problem: e for e in entries if isinstance(e, AttemptFinished)}
    for problem, attempt in (("softmax_fp32", 1), ("row_sum_fp32", 2)):
        outcome = finished[problem].outcome
        assert outcome == outcome_of(submitted[problem, attempt])
        assert (outcome.correct, outcome.timing_valid, outcome.iterations, outcome.tokens, outcome.device) == (
            True, False, 1, 0, "cpu (Triton interpreter)",
        )  # fmt: skip
    summary = summarise(record_dir)
    assert [(r.problem, r.status, r.attempts) for r in summary.rows] == [
        ("softmax_fp32", "finished", 1),
        ("row_sum_fp32", "finished", 2),
        ("gone_fp32", "failed", 1),
    ]
    assert summary.fast_p == ((0.0, 2 / 3), (1.0, None), (1.5, None), (2.0, None))
    assert (summary.geomean_speedup, summary.tokens, summary.cost_usd, summary.complete) == (None, 0, 0.0, True)
    assert "failed: row_sum_fp32 (attempt 1): worker died: The worker died unexpectedly" in rest
    assert "fast_0 0.67 (2/3) · fast_1 not timed · fast_1.5 not timed · fast_2 not timed · geomean not timed" in rest
    # Ray's files stayed in the folder given (its token there, mode 600), none in the home or /tmp/ray.
    assert (ray_dir / "auth_token").stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "user" / ".ray").exists()
    _no_canary(tmp_path / "sessions", ray_dir)


def _session(path: Path, problem: str, finished: bool) -> None:
    """A session folder as a task leaves it: begun, and finished (no correct kernel) or cut short."""
    config = SessionConfig("triton", "offline", "small", 1, None, None, None)
    store = DirectoryStore.create_at(path, problem, config)
    sid = store.session_id
    store.append(SessionStarted(sid, 1.0, problem, "/p.py", "triton", "offline", "cpu (Triton interpreter)",
                                "NVIDIA H200", config))  # fmt: skip
    store.append(IterationStarted(sid, 2.0, 0, None, "triton"))
    if finished:
        store.append(SessionFinished(sid, 3.0, "iteration budget spent (1 of 1)", None, None, 1))


@pytest.mark.slow
@pytest.mark.timeout(RAY_TIMEOUT_S)
def test_resume_runs_again_only_the_problems_without_a_finished_session(tmp_path: Path, ray_dir: Path) -> None:
    # The driver stopped with softmax_fp32 recorded finished, log_softmax_fp32 finished on disk but not in
    # the record, and row_sum_fp32 cut short: only row_sum_fp32 runs again, into a new session.
    home = tmp_path / "sessions"
    folder = sweeps_home(home) / "20261130-120000-beef"
    folder.mkdir(parents=True)
    (folder / "sweep.jsonl").touch()
    record = SweepRecord(folder)
    names = ("softmax_fp32", "log_softmax_fp32", "row_sum_fp32")
    plan = SessionPlan(SessionConfig("triton", "offline", "small", 1, None, None, None), 300.0)
    d = {n: str(home / f"s-{n}") for n in names}
    record.append(SweepStarted(folder.name, 1.0, tuple(load_problem(n) for n in names), plan, "local", 1.0, 2,
                               str(home)))  # fmt: skip
    for n in names:
        record.append(AttemptSubmitted(folder.name, 2.0, n, 1, d[n], "1 CPU slot"))
    _session(Path(d["softmax_fp32"]), "softmax_fp32", finished=True)
    _session(Path(d["log_softmax_fp32"]), "log_softmax_fp32", finished=True)
    _session(Path(d["row_sum_fp32"]), "row_sum_fp32", finished=False)
    done, late = outcome_of(Path(d["softmax_fp32"])), outcome_of(Path(d["log_softmax_fp32"]))
    assert done is not None and late is not None
    record.append(AttemptFinished(folder.name, 3.0, "softmax_fp32", 1, d["softmax_fp32"], done))
    before = len(record.read())
    proc = subprocess.run(
        [*EXE, "sweep", "--resume", folder.name, "--local-cpus", "1", "--ray-dir", str(ray_dir)],
        capture_output=True, text=True, cwd=ROOT, env=_env(tmp_path), timeout=RAY_TIMEOUT_S - 30, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    added = record.read()[before:]
    rerun = next(e for e in added if isinstance(e, AttemptSubmitted))
    assert [(type(e), getattr(e, "problem", None), getattr(e, "attempt", None)) for e in added] == [
        (SweepResumed, None, None),
        (AttemptFinished, "log_softmax_fp32", 1),  # taken as it finished on disk: not run again
        (AttemptFailed, "row_sum_fp32", 1),
        (AttemptSubmitted, "row_sum_fp32", 2),
        (AttemptFinished, "row_sum_fp32", 2),
        (SweepFinished, None, None),
    ]
    assert isinstance(added[0], SweepResumed) and added[0].problems == ("row_sum_fp32",)
    abandoned = added[2]
    assert isinstance(abandoned, AttemptFailed)
    assert (abandoned.cause, abandoned.reason, abandoned.retried, abandoned.session_dir) == (
        "abandoned", "the sweep stopped before this session finished", True, d["row_sum_fp32"],
    )  # fmt: skip
    assert isinstance(added[1], AttemptFinished) and added[1].outcome == late
    assert rerun.session_dir != d["row_sum_fp32"] and outcome_of(Path(rerun.session_dir)) is not None
    assert [e.kind for e in DirectoryStore.open(Path(d["row_sum_fp32"])).read_events().events] == [
        "session_started", "iteration_started",
    ]  # fmt: skip
    summary = summarise(folder)
    assert [(r.problem, r.status, r.attempts) for r in summary.rows] == [
        ("softmax_fp32", "finished", 1),
        ("log_softmax_fp32", "finished", 1),
        ("row_sum_fp32", "finished", 2),
    ]
    assert summary.fast_p[0] == (0.0, 1 / 3)  # the two made-up sessions kept no correct kernel
    assert "resumed sweep 20261130-120000-beef: running again row_sum_fp32" in proc.stdout


def test_summary_prints_every_problem_and_the_measures(tmp_path: Path) -> None:
    write_record(tmp_path / "sessions")
    proc = subprocess.run([*EXE, "sweep", "--summary", "20261130-120000-abcd"], capture_output=True, text=True,
                          cwd=ROOT, env=_env(tmp_path), timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # log_softmax_fp32 failed
    lines = [line.split("│")[1:-1] for line in proc.stdout.splitlines() if line.startswith("│")]
    assert [[cell.strip() for cell in line] for line in lines] == [
        ["softmax_fp32", "finished", "2.50x", "5", "1", "1,000", "$0.0100", "s-softmax_fp32-1"],
        ["row_sum_fp32", "finished", "1.20x", "5", "2", "500", "?", "s-row_sum_fp32-2"],
        ["log_softmax_fp32", "failed", "—", "—", "1", "—", "—",
         "raised: ConfigError: no API key for openai: set OPENAI_API_KEY or pass --model offline"],
    ]  # fmt: skip
    assert proc.stdout.splitlines()[-1] == (
        "fast_0 0.67 (2/3) · fast_1 0.67 (2/3) · fast_1.5 0.33 (1/3) · fast_2 0.33 (1/3) · geomean 1.73x · "
        "1,500 tokens · $0.0100 + 1 at an unknown price"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "name the problems to sweep, or give --resume SWEEP or --summary SWEEP (one of the three)"),
        (["softmax_fp32", "--resume", "x"], "name the problems to sweep, or give --resume SWEEP or --summary SWEEP"),
        (["--resume", "x", "--model", "offline", "--iterations", "3"],
         "--model, --iterations set a new sweep's sessions: --resume keeps the sweep's own, leave them out"),
        (["--resume", "nope"], "no sweep 'nope': give a sweep folder, or the id of one in"),
        (["softmax_fp32", "--gpus-per-session", "-1"], "--gpus-per-session must be 0 or more, not -1.0"),
        (["L1"], "L1 is a KernelBench level: pass --kernelbench PATH"),
        (["softmax_fp32", "--model", "human"], "--model human waits for you to write each kernel"),
        (["softmax_fp32", "--ray-dir", "/tmp/" + "x" * 40], f"/tmp/{'x' * 40} is too long for Ray's socket paths"),
    ],
)  # fmt: skip
def test_usage_errors_are_one_line_that_says_how_to_fix_it(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kernel_code.cli import main

    monkeypatch.setenv("KERNEL_CODE_SESSIONS_HOME", str(tmp_path / "sessions"))
    assert main(["sweep", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kernel-code: error: {message}") and err.count("\n") == 1, err
    assert not (tmp_path / "sessions").exists()  # nothing was recorded, no Ray was started


def test_a_narrow_terminal_keeps_the_table_whole_and_lists_sessions_below(tmp_path: Path) -> None:
    from rich.console import Console

    from kernel_code.sweep_cmd import print_summary

    console = Console(width=80, record=True, file=io.StringIO())
    assert print_summary(summarise(write_record(tmp_path / "sessions")), console) == 1
    text = console.export_text()
    assert "…" not in text  # at 80 columns the table used to cut names short: "softma…", "finish…"
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]
    assert rows == [
        ["softmax_fp32", "finished", "2.50x", "5", "1", "1,000", "$0.0100"],
        ["row_sum_fp32", "finished", "1.20x", "5", "2", "500", "?"],
        ["log_softmax_fp32", "failed", "—", "—", "1", "—", "—"],
    ]
    below = " ".join(text.split("┘", 1)[1].split())  # a long line wraps at 80 columns; it is not cut
    assert below.startswith(
        "softmax_fp32: s-softmax_fp32-1 row_sum_fp32: s-row_sum_fp32-2 log_softmax_fp32: raised: ConfigError: "
        "no API key for openai: set OPENAI_API_KEY or pass --model offline fast_0 0.67 (2/3)"
    )
