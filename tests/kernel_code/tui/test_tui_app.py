"""The TUI under Textual's Pilot: each panel as events arrive, and every key.

Panels are fed by hand (``Feed``); the keys that steer the engine (p, b, steering, q) run the real
loop (``optimize``) with a scripted generator and an evaluator the test releases one kernel at a time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.text import Text
from textual.widgets import Input, RichLog, Static

from kernel_code.tui.app import DASHBOARD_NOT_BUILT, DASHBOARD_STARTING, KernelCodeApp, TuiOptions
from kernel_code.tui.launch import paced
from kernel_code.tui.screens import DiffScreen, KernelScreen, RooflineScreen
from kernel_code.tui.widgets import ExperimentLog, HeaderBar, ProfilePanel, TrajectoryPanel
from openkernel.events import Decision, IterationStarted, Paused, Resumed, SessionConfig, SessionFinished
from openkernel.generate.base import Proposal, ScriptedGenerator
from openkernel.loop import Controls, LoopOptions, optimize
from openkernel.problems import load_problem
from openkernel.store import DirectoryStore
from tests.kernel_code.tui.events import SID, finished, iteration, mid_run, started
from tests.kernel_code.tui.pilot import Feed, GatedEvaluator, screen_text, settle

Body = Callable[[KernelCodeApp, object], Awaitable[None]]
KERNEL = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.softmax(-1)\n"


def _run(app: KernelCodeApp, body: Body, size: tuple[int, int] = (220, 40)) -> None:
    """Run ``body`` against the app; the screen is wide enough that chat lines do not wrap."""

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await body(app, pilot)

    asyncio.run(main())


def _chat(app: KernelCodeApp) -> list[str]:
    return [strip.text.rstrip() for strip in app.query_one("#chat-log", RichLog).lines]


def _row(app: KernelCodeApp, iteration: int) -> list[str]:
    cells = app.query_one(ExperimentLog).get_row(str(iteration))
    return [cell.plain if isinstance(cell, Text) else cell for cell in cells]


def _kernels(tmp_path: Path, *iterations: int) -> Path:
    for n in iterations:
        path = tmp_path / "kernels" / f"iter_{n:04d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(KERNEL.replace("softmax(-1)", f"softmax(-1) * {n}"))
    return tmp_path


def test_panels_follow_the_events() -> None:
    feed = Feed()
    app = KernelCodeApp(feed)

    async def body(app: KernelCodeApp, pilot) -> None:  # type: ignore[no-untyped-def]
        feed.push(started())
        await settle(pilot, lambda: app.model.phase == "running", "the session start")
        assert "● running iter 0/10" in app.query_one(HeaderBar).render().plain
        assert app.query_one(TrajectoryPanel).render().plain.startswith("waiting for the first iteration…")
        assert app.query_one(ProfilePanel).render().plain.endswith("no kernel evaluated yet")

        feed.push(*iteration(0, "keep", 1.0, 0, intent="baseline")[:2])  # started, and the reply streaming
        await settle(pilot, lambda: app.model.current_iteration == 0, "iteration 0")
        assert _row(app, 0) == ["#0", "—", "… ···", "running"]
        assert str(app.query_one("#stream", Static).content) == "⋯ code\n⋯ ```"  # the last 2 lines

        feed.push(*iteration(0, "keep", 1.0, 0, intent="baseline")[2:], *iteration(1, "discard", 0.7, 0))
        await settle(pilot, lambda: app.model.completed == 2, "two decisions")
        assert [_row(app, 0), _row(app, 1)] == [
            ["#0", "1.00x", "★ keep", "baseline"],
            ["#1", "0.70x", "· disc", "idea 1"],
        ]
        assert app.query_one(TrajectoryPanel).render().plain.splitlines()[:2] == ["█▆", "★·"]
        assert app.query_one(ProfilePanel).render().plain.splitlines()[0] == "Bottleneck: memory_bound"
        assert app.query_one(ProfilePanel).border_title == "Profiling Summary · #1"
        assert _chat(app)[-2:] == [
            'Critic: "The kernel reads its input twice. Next: fuse the two passes."',
            "· discard #1: not faster than the best",
        ]
        assert str(app.query_one("#stream", Static).content) == ""

        feed.push(*iteration(2, "keep", 1.3, 2))  # a new best: the old best's row loses its star
        await settle(pilot, lambda: app.model.completed == 3, "iteration 2")
        assert [_row(app, 0)[2], _row(app, 2)[2]] == ["↑ keep", "★ keep"]
        assert app.query_one(ExperimentLog).cursor_row == 2  # the log follows the newest row

        feed.push(finished(3))
        feed.close()
        await settle(pilot, lambda: app.engine_done, "the end of the stream")
        assert "■ finished" in app.query_one(HeaderBar).render().plain
        assert _chat(app)[-1] == "the session is closed: q exits"

    _run(app, body)


def test_a_new_rows_intent_is_shown_whole_even_if_drawn_before_the_table_measured_it() -> None:
    """A row drawn in the frame it arrived (before the table's idle-time measuring) must not stay cut.

    CI once showed "bad ti" for "bad tiling": the row had been drawn at the label's width and the table
    kept that drawing after it widened the column.
    """
    app = KernelCodeApp(Feed())

    async def body(app: KernelCodeApp, pilot: object) -> None:
        table = app.query_one(ExperimentLog)
        app.model.apply(started())
        for event in iteration(0, "keep", 1.0, 0, intent="bad tiling"):
            app.model.apply(event)
        table.apply_rows(app.model.take_changed_rows())
        drawn_at_once = table.render_line(1).text  # before any idle: the table has not measured the row
        await pilot.pause(0.2)  # type: ignore[attr-defined]
        assert "bad tiling" in drawn_at_once
        assert "bad tiling" in table.render_line(1).text

    _run(app, body, size=(132, 40))


def test_cpu_timings_are_flagged_where_the_numbers_are() -> None:
    feed = Feed()
    app = KernelCodeApp(feed)

    async def body(app: KernelCodeApp, pilot) -> None:  # type: ignore[no-untyped-def]
        feed.push(*mid_run(gpu=False))
        await settle(pilot, lambda: app.model.completed == 5, "five iterations")
        assert app.query_one(TrajectoryPanel).border_subtitle == "not GPU timings"
        assert app.query_one(ExperimentLog).border_subtitle == "* not GPU timings"
        assert _row(app, 4)[1] == "1.80x*"
        profile = app.query_one(ProfilePanel).render().plain
        assert profile.splitlines()[-1] == "⚠ not GPU timings: wall clock on the CPU under the Triton interpreter"

    _run(app, body)


def test_d_shows_the_dashboard_hook_line(tmp_path: Path) -> None:
    seen: list[Path | None] = []

    def hook(session_dir: Path | None) -> str:
        seen.append(session_dir)
        return "dashboard: http://127.0.0.1:8050/?token=…"

    for options, expected in ((TuiOptions(), DASHBOARD_NOT_BUILT), (TuiOptions(tmp_path, dashboard=hook), None)):
        feed = Feed()

        async def body(app: KernelCodeApp, pilot, expected: str | None = expected) -> None:  # type: ignore[no-untyped-def]
            await pilot.press("d")
            await settle(pilot, lambda: len(_chat(app)) == 2, "the dashboard line")
            assert _chat(app) == [DASHBOARD_STARTING, expected or "dashboard: http://127.0.0.1:8050/?token=…"]

        _run(KernelCodeApp(feed, options), body)
    assert seen == [tmp_path]
    assert DASHBOARD_NOT_BUILT == "dashboard: not built yet (issue 7)"
    assert DASHBOARD_STARTING == "dashboard: starting… (the link follows)"


def test_the_ui_answers_keys_while_the_dashboard_starts(tmp_path: Path) -> None:
    """The hook (Dash's import and the server's start, ~2 s) runs off the UI thread: keys work meanwhile."""
    entered, release, returned = threading.Event(), threading.Event(), threading.Event()
    calls: list[Path | None] = []
    link = "dashboard: http://127.0.0.1:8050/session/s1?token=…"

    def slow_hook(session_dir: Path | None) -> str:
        calls.append(session_dir)
        entered.set()
        release.wait(timeout=5)  # on the UI thread (the old way) the test's keys would wait this out
        returned.set()
        return link

    async def body(app: KernelCodeApp, pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("d")
        await settle(pilot, entered.is_set, "the hook to start")
        assert _chat(app) == [DASHBOARD_STARTING]
        await pilot.press("s")  # handled while the hook is still busy
        assert app.query_one("#skills", Static).display is True
        assert not returned.is_set()
        await pilot.press("d")  # again while starting: said so, not started twice
        assert _chat(app) == [DASHBOARD_STARTING, DASHBOARD_STARTING]
        release.set()
        await settle(pilot, lambda: len(_chat(app)) == 3, "the link")
        assert _chat(app) == [DASHBOARD_STARTING, DASHBOARD_STARTING, link]
        await pilot.press("d")  # once started, d answers the link at once
        await settle(pilot, lambda: len(_chat(app)) == 4, "the link again")
        assert _chat(app)[-1] == link
        assert calls == [tmp_path, tmp_path]

    _run(KernelCodeApp(Feed(), TuiOptions(tmp_path, dashboard=slow_hook)), body)


def test_a_dashboard_hook_that_raises_is_said_in_the_chat_and_d_tries_again(tmp_path: Path) -> None:
    answers: list[str | Exception] = [OSError("no such file: dash"), "dashboard: http://127.0.0.1:8050/?token=…"]

    def hook(_session_dir: Path | None) -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def body(app: KernelCodeApp, pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("d")
        await settle(pilot, lambda: len(_chat(app)) == 2, "the error")
        await pilot.press("d")
        await settle(pilot, lambda: len(_chat(app)) == 3, "the link")
        assert _chat(app) == [
            DASHBOARD_STARTING,
            "dashboard: could not start (OSError: no such file: dash)",
            "dashboard: http://127.0.0.1:8050/?token=…",
        ]

    _run(KernelCodeApp(Feed(), TuiOptions(tmp_path, dashboard=hook)), body)


def test_k_diffs_the_latest_kernel_against_the_previous_best(tmp_path: Path) -> None:
    feed = Feed()
    app = KernelCodeApp(feed, TuiOptions(_kernels(tmp_path, 0, 1, 2)))

    async def body(app: KernelCodeApp, pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("k")
        await settle(pilot, lambda: bool(_chat(app)), "the k message")
        assert _chat(app) == ["k: no kernel proposed yet"]
        feed.push(started(), *iteration(0, "keep", 1.0, 0))
        await settle(pilot, lambda: app.model.completed == 1, "iteration 0")
        await pilot.press("k")
        await settle(pilot, lambda: _chat(app)[-1].startswith("k:"), "the k message")
        assert _chat(app)[-1] == "k: no best before #0 to compare it with"

        feed.push(*iteration(1, "discard", 0.8, 0), *iteration(2, "keep", 1.5, 2))
        await settle(pilot, lambda: app.model.completed == 3, "iterations 1 and 2")
        await pilot.press("k")
        await settle(pilot, lambda: isinstance(app.screen, DiffScreen), "the diff screen")
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        assert screen.title_text.startswith("#0 (previous best)  →  #2 (latest)   (+1 −1 lines")
        assert screen.diff.left.plain.splitlines()[4] == "~ 5         return x.softmax(-1) * 0"
        assert screen.diff.right.plain.splitlines()[4] == "~ 5         return x.softmax(-1) * 2"
        text = screen_text(app)
        assert "return x.softmax(-1) * 0" in text and "return x.softmax(-1) * 2" in text
        await pilot.press("k")  # the same key closes it
        await settle(pilot, lambda: not isinstance(app.screen, DiffScreen), "the diff to close")

    _run(app, body)


def test_r_draws_the_roofline_with_every_timed_kernel() -> None:
    feed = Feed()
    app = KernelCodeApp(feed)

    async def body(app: KernelCodeApp, pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("r")  # nothing evaluated yet: the target's datasheet ceilings
        await settle(pilot, lambda: isinstance(app.screen, RooflineScreen), "the roofline")
        text = screen_text(app)
        assert "no kernel evaluated yet: H200 datasheet ceilings" in text
        assert "memory 4.8 TB/s · fp32 67 TFLOP/s · tf32 494 TFLOP/s" in text
        await pilot.press("escape")
        feed.push(*mid_run())
        await settle(pilot, lambda: app.model.completed == 5, "five iterations")
        await pilot.press("r")
        await settle(pilot, lambda: isinstance(app.screen, RooflineScreen), "the roofline")
        lines = [line.strip(" █") for line in screen_text(app).splitlines()]
        assert "softmax_fp32 on NVIDIA H200" in lines
        assert [line for line in lines if line[:2] in ("R ", "● ", "★ ")] == [
            "R reference (PyTorch): 100 GFLOP/s at 1.25 FLOP/byte",
            "● #0 keep: 100 GFLOP/s at 1.25 FLOP/byte",
            "● #1 discard: 70 GFLOP/s at 1.25 FLOP/byte",
            "● #2 keep: 130 GFLOP/s at 1.25 FLOP/byte",
            "★ #4 keep (best): 180 GFLOP/s at 1.25 FLOP/byte",
        ]
        await pilot.press("r")
        await settle(pilot, lambda: not isinstance(app.screen, RooflineScreen), "the roofline to close")

    _run(app, body)


def test_s_toggles_the_skill_matches() -> None:
    feed = Feed()
    app = KernelCodeApp(feed)

    async def body(app: KernelCodeApp, pilot) -> None:  # type: ignore[no-untyped-def]
        skills = app.query_one("#skills", Static)
        await pilot.press("s")
        assert (skills.display, str(skills.content)) == (True, "skills: no diagnosis yet (s hides)")
        feed.push(*mid_run())
        await settle(pilot, lambda: app.model.completed == 5, "five iterations")
        assert str(skills.content).splitlines() == [
            "Skills for memory_bound, low_dram_throughput, softmax (s hides):",
            "• No hidden copies around the kernel [avoid-wrapper-copies]",
            "• Online softmax (running max and rescaled sum) [online-softmax]",
            "• Recompute cheap values instead of storing them [recompute-vs-store]",
            "• One-pass instead of two-pass reductions [single-pass-reduction]",
            "• Vectorised loads and stores (vector width) [vectorised-loads]",
        ]
        await pilot.press("s")
        assert skills.display is False

    _run(app, body)


def test_selecting_a_row_shows_that_kernel(tmp_path: Path) -> None:
    feed = Feed()
    app = KernelCodeApp(feed, TuiOptions(_kernels(tmp_path, 0, 1, 2, 4)))

    async def body(app: KernelCodeApp, pilot) -> None:  # type: ignore[no-untyped-def]
        feed.push(*mid_run())
        await settle(pilot, lambda: app.model.completed == 5, "five iterations")
        table = app.query_one(ExperimentLog)
        table.move_cursor(row=1)
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, KernelScreen), "the kernel screen")
        text = screen_text(app)
        assert "#1 · bad tiling · kernels/iter_0001.py" in text
        assert "return x.softmax(-1) * 1" in text
        await pilot.press("escape")
        await settle(pilot, lambda: not isinstance(app.screen, KernelScreen), "the kernel screen to close")
        table.move_cursor(row=3)  # iteration 3 proposed no kernel
        await pilot.press("enter")
        await settle(pilot, lambda: _chat(app)[-1].startswith("#3"), "the message")
        assert _chat(app)[-1] == "#3: no kernel source to show"

    _run(app, body)


def _live(tmp_path: Path, evaluator: GatedEvaluator, iterations: int) -> KernelCodeApp:
    """The real loop on a session directory, a scripted generator, the gated evaluator."""
    config = SessionConfig("triton", "scripted", "small", iterations, None, None, None)
    store = DirectoryStore.create_at(tmp_path / "session", "softmax_fp32", config)
    proposals = [Proposal(KERNEL, f"idea {n}", f"Trying idea {n}.", None, None) for n in range(iterations)]
    problem, generator = load_problem("softmax_fp32"), ScriptedGenerator(proposals)
    options = LoopOptions(device="cpu (Triton interpreter)")

    def source(controls: Controls):  # type: ignore[no-untyped-def]
        return optimize(problem, generator, evaluator, store, config, controls=controls, options=options)

    return KernelCodeApp(source, TuiOptions(store.path))


def _in_evaluator(app: KernelCodeApp, evaluator: GatedEvaluator, n: int) -> Callable[[], bool]:
    """Iteration ``n`` waits in the evaluator and its proposal is on screen: no event comes until released."""
    return lambda: len(evaluator.backends) == n + 1 and f"› #{n} proposed: idea {n}" in _chat(app)


def test_p_b_steering_and_q_steer_the_real_loop(tmp_path: Path) -> None:
    evaluator = GatedEvaluator([1.0, 1.2, 0.9, 1.1])
    app = _live(tmp_path, evaluator, 4)

    async def body(app: KernelCodeApp, pilot) -> None:  # type: ignore[no-untyped-def]
        await settle(pilot, _in_evaluator(app, evaluator, 0), "iteration 0 in the evaluator")
        await pilot.press("p")  # pause: taken when iteration 0 is decided
        assert app.controls.is_paused
        assert _chat(app)[-1] == "⏸ pause requested: the loop pauses when this iteration is decided"
        await pilot.press("b")
        assert app.controls.pending_backend == "cuda"
        assert "[triton → cuda next]" in app.query_one(HeaderBar).render().plain
        await pilot.press("i")
        assert app.focused is app.query_one("#steer", Input)
        await pilot.press(*"use float4", "enter")
        assert app.focused is app.query_one(ExperimentLog)
        assert _chat(app)[-1] == "› you: use float4 (for the next iteration)"
        evaluator.release()
        await settle(pilot, lambda: app.model.phase == "paused", "the pause")
        assert "⏸ PAUSED" in app.query_one(HeaderBar).render().plain
        await pilot.press("p")
        await settle(pilot, _in_evaluator(app, evaluator, 1), "iteration 1 in the evaluator")
        started = app.model.iterations[1]
        assert (started.backend, started.intent) == ("cuda", "idea 1")
        assert "› steering: use float4" in _chat(app)
        assert "[cuda]" in app.query_one(HeaderBar).render().plain
        await pilot.press("q")  # stop: the loop finishes when iteration 1 is decided
        assert _chat(app)[-1] == "■ stopping: the session closes when the current iteration is decided"
        assert app.return_code is None  # still running: it waits for the iteration
        evaluator.release()
        await settle(pilot, lambda: app.return_code is not None, "the app to exit by itself")

    _run(app, body)
    assert (app.return_code, evaluator.backends) == (0, ["triton", "cuda"])
    events = DirectoryStore.open(tmp_path / "session").read_events().events
    kinds = [type(e) for e in events]
    assert kinds.count(Decision) == 2 and Paused in kinds and Resumed in kinds
    starts = [e for e in events if isinstance(e, IterationStarted)]
    assert [(e.iteration, e.backend, e.hints) for e in starts] == [(0, "triton", ()), (1, "cuda", ("use float4",))]
    last = events[-1]
    assert isinstance(last, SessionFinished) and (last.reason, last.iterations) == ("stopped by the user", 2)


def test_an_empty_hint_is_refused_with_the_reason(tmp_path: Path) -> None:
    evaluator = GatedEvaluator([1.0])
    app = _live(tmp_path, evaluator, 1)

    async def body(app: KernelCodeApp, pilot) -> None:  # type: ignore[no-untyped-def]
        await settle(pilot, _in_evaluator(app, evaluator, 0), "iteration 0 in the evaluator")
        await pilot.press("i", "space", "enter")
        assert _chat(app)[-1] == "steering: a hint needs some text: say what the next kernel should try"
        evaluator.release()
        await settle(pilot, lambda: app.engine_done, "the session to finish")
        await pilot.press("p")
        assert _chat(app)[-1] == "the session is closed: pause is off"
        await pilot.press("q")
        await settle(pilot, lambda: app.return_code is not None, "the app to exit")

    _run(app, body)
    assert app.return_code == 0


def test_a_replay_is_read_only_and_q_leaves_at_once() -> None:
    feed = Feed()
    app = KernelCodeApp(feed, TuiOptions(read_only=True))

    async def body(app: KernelCodeApp, pilot) -> None:  # type: ignore[no-untyped-def]
        feed.push(*mid_run())
        await settle(pilot, lambda: app.model.completed == 5, "five iterations")
        assert "▷ replay" in app.query_one(HeaderBar).render().plain
        for key in ("p", "b", "i"):
            await pilot.press(key)
        assert _chat(app)[-3:] == [
            "replay is read-only: pause is off",
            "replay is read-only: the backend switch is off",
            "replay is read-only: steering is off",
        ]
        assert (app.controls.is_paused, app.controls.pending_backend) == (False, None)
        await pilot.press("q")
        await settle(pilot, lambda: app.return_code is not None, "the app to exit")

    _run(app, body)
    assert (app.return_code, app.controls.stop_requested) == (0, True)


def test_an_engine_error_is_shown_and_kept_for_the_cli() -> None:
    feed = Feed()
    app = KernelCodeApp(feed)

    async def body(app: KernelCodeApp, pilot) -> None:  # type: ignore[no-untyped-def]
        feed.push(started())
        feed.fail(RuntimeError("the generator's server went away"))
        await settle(pilot, lambda: app.engine_done, "the engine error")
        assert _chat(app)[-2:] == ["✗ the engine stopped: the generator's server went away", "q exits"]
        await pilot.press("q")

    _run(app, body)
    assert str(app.engine_error) == "the generator's server went away"


def test_paced_replays_at_the_chosen_speed_and_stops_when_told() -> None:
    events = [*iteration(0, "keep", 1.0, 0, at=100.0)[:1], *iteration(1, "keep", 1.0, 0, at=102.0)[:1]]
    events.append(IterationStarted(SID, 200.0, 2, None))  # 98 s later: capped
    slept: list[float] = []
    controls = Controls()
    assert list(paced(events, 10.0, controls, slept.append)) == events
    assert round(sum(slept), 6) == round(0.2 + 5.0, 6)  # 2 s at 10x, then the 5 s cap
    assert list(paced(events, 0.0, controls, slept.append)) == events
    controls.stop()
    assert list(paced(events, 10.0, controls, slept.append)) == []
