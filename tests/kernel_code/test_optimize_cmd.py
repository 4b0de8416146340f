"""``kernel-code optimize --headless`` end to end: a local server speaking the OpenAI protocol, the real
evaluator on the CPU, the session on disk; then SIGKILL mid-iteration and ``kernel-code resume``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openkernel.events import Decision, Resumed, from_json
from openkernel.store import DirectoryStore
from tests.conftest import KERNELS, ROOT, SOLUTIONS
from tests.llm_fakes import FakeServer, openai_events, silent, sse

EXE = [sys.executable, "-c", "import sys; from kernel_code.cli import main; sys.exit(main())"]
HONEST = (SOLUTIONS / "softmax_fp32.py").read_text()
CHEAT = (KERNELS / "no_kernel_torch.py").read_text()


def _reply(intent: str, source: str) -> list[str]:
    return openai_events([f"Intent: {intent}\n", "```python\n", source, "```\n"])


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer([sse(_reply("one row per program", HONEST)), sse(_reply("call torch", CHEAT))])
    fake.start()
    yield fake
    fake.stop()


def _env() -> dict[str, str]:
    return {**os.environ, "OPENAI_API_KEY": "sk-canary-optimize-0001"}


def test_headless_session_end_to_end(server: FakeServer, tmp_path: Path) -> None:
    session = tmp_path / "session"
    proc = subprocess.run(
        [*EXE, "optimize", "softmax_fp32", "--model", "openai:gpt-4o", "--base-url", server.root + "/v1",
         "--iterations", "2", "--headless", "--session-dir", str(session)],
        capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    store = DirectoryStore.open(session)
    decisions = [e for e in store.read_events().events if isinstance(e, Decision)]
    assert [(d.iteration, d.decision) for d in decisions] == [(0, "keep"), (1, "error")]
    assert decisions[1].reason.startswith("rejected: no custom kernel ran during forward()")
    assert (session / "best.py").read_text() == HONEST
    assert (session / "kernels" / "iter_0000.py").read_text() == HONEST
    assert "finished: iteration budget spent (2 of 2)" in proc.stdout
    # The key never reaches the session's files.
    for path in session.rglob("*"):
        if path.is_file():
            assert "sk-canary-optimize-0001" not in path.read_text(errors="replace"), path


def test_sigkill_mid_iteration_then_resume(tmp_path: Path) -> None:
    # Iteration 0 gets the honest kernel; iteration 1's reply never comes (the server stays silent).
    fake = FakeServer([sse(_reply("one row per program", HONEST)), silent(600)])
    fake.start()
    session = tmp_path / "session"
    try:
        proc = subprocess.Popen(
            [*EXE, "optimize", "softmax_fp32", "--model", "openai:gpt-4o", "--base-url", fake.root + "/v1",
             "--iterations", "2", "--headless", "--session-dir", str(session)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=_env(), start_new_session=True,
        )  # fmt: skip
        events_file = session / "events.jsonl"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # wait until iteration 1 has started: the process is mid-iteration
            lines = events_file.read_text().splitlines() if events_file.exists() else []
            if any(json.loads(x).get("kind") == "iteration_started" and json.loads(x).get("iteration") == 1
                   for x in lines):  # fmt: skip
                break
            time.sleep(0.2)
        else:
            pytest.fail("the session never reached iteration 1")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        fake.stop()
    store = DirectoryStore.open(session)
    point = store.resume_point()
    assert (point.completed, point.interrupted, point.next_iteration) == ((0,), 1, 1)
    # Resume with a server that now answers: the interrupted iteration is redone, iteration 0 stands.
    again = FakeServer([sse(_reply("same kernel again", HONEST))])
    again.start()
    try:
        done = subprocess.run(
            [*EXE, "resume", str(session), "--base-url", again.root + "/v1", "--headless"],
            capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=600, check=False,
        )  # fmt: skip
    finally:
        again.stop()
    assert done.returncode == 0, done.stderr
    events = [from_json(json.loads(line)) for line in (session / "events.jsonl").read_text().splitlines()]
    resumed = [e for e in events if isinstance(e, Resumed)]
    assert [r.reason for r in resumed] == ["resumed after the process was killed: iteration 1 is redone"]
    decisions = [(e.iteration, e.decision) for e in events if isinstance(e, Decision)]
    assert decisions[0] == (0, "keep")
    assert [i for i, _ in decisions] == [0, 1]


@pytest.mark.parametrize("command", [["optimize", "softmax_fp32"], ["replay", "no-such-session"]])
def test_without_a_terminal_the_tui_refuses_before_recording_anything(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kernel_code.cli import main

    if command[0] == "replay":  # a real recorded session to replay, so that only the terminal is missing
        recorded = tmp_path / "recorded"
        assert main(["optimize", "softmax_fp32", "--headless", "--size", "small", "--iterations", "1",
                     "--session-dir", str(recorded)]) == 0  # fmt: skip
        command = ["replay", str(recorded)]
        capsys.readouterr()
    target = tmp_path / "new-session"
    assert main([*command, "--session-dir", str(target)]) == 2  # pytest's stdin is not a terminal
    assert capsys.readouterr().err == (
        "kernel-code: error: the TUI needs a terminal (stdin or stdout is not one): pass --headless to print progress\n"
    )
    assert not target.exists()
