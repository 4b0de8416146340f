"""Helpers for driving the TUI in tests: a hand-fed event source, a gated evaluator, the screen as text."""

from __future__ import annotations

import io
import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console
from textual.app import App
from textual.pilot import Pilot

from openkernel.evaluate import Evaluator
from openkernel.events import Event
from openkernel.loop import Controls
from openkernel.types import EvalResult, EvalStatus, Problem, TimingStats

WAIT_S = 10.0  # the longest a test waits for the UI to show something


class Feed:
    """An event source the test feeds by hand: ``push`` events, ``close`` to end the stream."""

    _END = object()

    def __init__(self) -> None:
        self._queue: queue.Queue[object] = queue.Queue()
        self.controls: Controls | None = None

    def __call__(self, controls: Controls) -> Iterator[Event]:
        self.controls = controls
        while (item := self._queue.get()) is not self._END:
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]

    def push(self, *events: Event) -> None:
        for event in events:
            self._queue.put(event)

    def fail(self, error: BaseException) -> None:
        self._queue.put(error)

    def close(self) -> None:
        self._queue.put(self._END)


class GatedEvaluator(Evaluator):
    """Evaluates only when the test lets it (``release``): the loop waits mid-iteration meanwhile."""

    def __init__(self, speedups: list[float | None]) -> None:
        self._speedups = speedups
        self._gate = threading.Semaphore(0)
        self.calls = 0
        self.backends: list[str | None] = []  # the backend each call was asked for

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self._gate.release()

    def evaluate(self, problem: Problem, candidate: Path, backend: str | None = None) -> EvalResult:
        self.backends.append(backend)
        assert self._gate.acquire(timeout=60), "the test never released the evaluation"
        speedup = self._speedups[self.calls]
        self.calls += 1
        return cpu_result(speedup)


def cpu_result(speedup: float | None) -> EvalResult:
    """A result as the CPU evaluator gives it (wall-clock timings, no GPU); None: an incorrect kernel."""
    correct = speedup is not None
    runtime = 2.0 / speedup if speedup else None
    timing = TimingStats("wall_clock", 5, runtime, runtime, runtime, runtime, runtime, runtime, 0.0, None, None) \
        if runtime else None  # fmt: skip
    return EvalResult(
        status=EvalStatus.CORRECT if correct else EvalStatus.INCORRECT,
        reasons=("all checks passed",) if correct else ("output differs at 3 of 4096 elements",),
        problem="softmax_fp32", candidate="c.py", backend="triton", device="cpu (Triton interpreter)", size="small",
        timing_valid=False, timing_note="wall clock on the CPU under the Triton interpreter",
        runtime_ms=runtime, reference_runtime_ms=2.0, speedup=speedup, compile_baseline_runtime_ms=None,
        candidate_timing=timing, reference_timing=None, trials=(), kernels_launched=(), candidate_aten_ops=(),
        target_compiles=(), profile=None, warnings=(), wall_seconds=0.1, log_tail="",
    )  # fmt: skip


def screen_text(app: App[object]) -> str:
    """The screen as plain text, as a terminal would show it (the SVG screenshot's content, without styles)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, force_terminal=True,
                      color_system="truecolor", legacy_windows=False, safe_box=False)  # fmt: skip
    # The compositor is what export_screenshot() renders too; Textual has no public plain-text export.
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)


async def settle(pilot: Pilot[object], done: Callable[[], bool], what: str) -> None:
    """Let the app run until ``done()`` holds; fail saying ``what`` was awaited."""
    for _ in range(int(WAIT_S / 0.05)):
        if done():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}\n{screen_text(pilot.app)}")
