"""The real program in a real terminal: ``kernel-code optimize`` in tmux, keys sent, the screen read back.

The command is the real CLI (``tmux_entry`` only swaps in a scripted generator and a slow CPU-style
evaluator); tmux runs on its own socket, so the test never touches a user's tmux server.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openkernel.events import Decision, KernelProposed, Paused, Resumed, SessionFinished
from openkernel.store import DirectoryStore
from tests.conftest import ROOT
from tests.kernel_code.tui.events import finished, mid_run, started

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
WAIT_S = 20.0


class Tmux:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def run(self, *args: str) -> str:
        cmd = ["tmux", "-L", self.socket, *args]
        # COLUMNS/LINES (pytest may set them) would override the pane's size for the program inside.
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=10, env=env).stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "kc")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "kc", *keys)

    def wait_for(self, text: str) -> str:
        deadline = time.monotonic() + WAIT_S
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared; the screen:\n{screen}")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    server = Tmux(f"kernel-code-test-{os.getpid()}")
    yield server
    subprocess.run(["tmux", "-L", server.socket, "kill-server"], capture_output=True, check=False, timeout=10)


def test_optimize_in_tmux_keys_and_clean_quit(tmux: Tmux, tmp_path: Path) -> None:
    session, rc = tmp_path / "session", tmp_path / "rc"
    command = (
        f"cd {ROOT} && {sys.executable} -m tests.kernel_code.tui.tmux_entry optimize softmax_fp32 --size small "
        f"--model scripted --iterations 30 --session-dir {session}; echo $? > {rc}"
    )
    tmux.run("new-session", "-d", "-x", "100", "-y", "30", "-s", "kc", command)

    screen = tmux.wait_for("iter 2/30")  # iterations arrive
    assert "[CPU · interpreter] [triton] [softmax_fp32]" in screen
    assert "#1     1.50x*    ★ keep    idea 1" in screen
    assert "not GPU timings" in screen

    tmux.keys("k")
    screen = tmux.wait_for("(previous best)")
    assert "→  #" in screen and "(latest)" in screen and "BLOCK1" in screen
    tmux.keys("k")  # k again closes the diff
    tmux.wait_for("Experiment Log")

    tmux.keys("r")
    screen = tmux.wait_for("Roofline  (esc closes)")
    assert "softmax_fp32 on NVIDIA H200" in screen and "memory 4.8 TB/s" in screen
    tmux.keys("Escape")
    tmux.wait_for("Experiment Log")
    time.sleep(0.2)  # a key right after Escape would read as alt+key

    tmux.keys("s")
    tmux.wait_for("Skills for")
    tmux.keys("s")

    tmux.keys("p")
    screen = tmux.wait_for("⏸ PAUSED")
    completed_at_pause = int(screen.split("iter ")[1].split("/")[0])
    time.sleep(1.5)  # paused: no iteration is decided meanwhile
    assert f"iter {completed_at_pause}/30" in tmux.screen()
    tmux.keys("p")
    tmux.wait_for(f"iter {completed_at_pause + 1}/30")

    tmux.keys("q")
    deadline = time.monotonic() + WAIT_S
    while not rc.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert rc.read_text().strip() == "0"
    events = DirectoryStore.open(session).read_events().events
    kinds = [type(e) for e in events]
    assert Paused in kinds and Resumed in kinds
    last = events[-1]
    assert isinstance(last, SessionFinished) and last.reason == "stopped by the user"
    assert last.iterations == kinds.count(Decision) >= completed_at_pause + 1


def _recorded(path: Path) -> Path:
    """A recorded session on disk: the hand-made mid-run events, finished, with their kernel files."""
    store = DirectoryStore.create_at(path, "softmax_fp32", started().config)
    events = [*mid_run()[:-2], finished()]
    for event in events:
        store.append(dataclasses.replace(event, session_id=store.session_id))
        if isinstance(event, KernelProposed):
            store.write_kernel(event.iteration, f"# kernel of iteration {event.iteration}\n")
    return path


def test_view_replays_a_recorded_session_read_only(tmux: Tmux, tmp_path: Path) -> None:
    session, rc = _recorded(tmp_path / "recorded"), tmp_path / "rc"
    command = f"cd {ROOT} && {sys.executable} -m kernel_code view {session} --speed 0; echo $? > {rc}"
    tmux.run("new-session", "-d", "-x", "100", "-y", "30", "-s", "kc", command)
    tmux.wait_for("▷ replay complete: q exits")
    # The log's rows are drawn in the same refresh as the status line or just after it (seen under load).
    screen = tmux.wait_for("#4     1.80x     ★ keep    vectorized")
    assert "■ finished iter 5/10" in screen and "▷ replay" in screen
    tmux.keys("p")
    tmux.wait_for("replay is read-only: pause is off")
    tmux.keys("q")
    deadline = time.monotonic() + WAIT_S
    while not rc.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert rc.read_text().strip() == "0"


def test_view_errors_are_one_line(tmp_path: Path) -> None:
    session = _recorded(tmp_path / "recorded")
    cli = [sys.executable, "-m", "kernel_code", "view"]
    cases = {
        "--speed -1": ([str(session), "--speed", "-1"],
                       "kernel-code: error: --speed must be 0 (all at once) or more, got -1"),
        "no terminal": ([str(session)], "kernel-code: error: the TUI needs a terminal (stdin or stdout is not one): "
                                        "pass --headless to print progress"),
        "no session": ([str(tmp_path / "nope")], f"kernel-code: error: no session at {tmp_path / 'nope'}: "
                                                  "list them with `kernel-code sessions`"),
    }  # fmt: skip
    for name, (args, expected) in cases.items():
        proc = subprocess.run([*cli, *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
                              cwd=ROOT, check=False)  # fmt: skip
        assert (proc.returncode, proc.stderr.strip()) == (2, expected), name
