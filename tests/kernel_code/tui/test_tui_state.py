"""The TUI's session model and its pure renderings, on hand-made event sequences (no Textual app)."""

from __future__ import annotations

from kernel_code.tui.diff import side_by_side
from kernel_code.tui.roofline import Roof, RoofPoint, plot_roofline
from kernel_code.tui.state import CHAT_LIMIT, ChatLine, ProfileView, SessionModel, prose_of
from kernel_code.tui.text import header_text, judge_l2, profile_text, trajectory_text
from openkernel.events import IterationStarted, Paused, Resumed
from tests.kernel_code.tui.events import CPU, SID, finished, iteration, mid_run, started


def _model(events: list) -> SessionModel:  # type: ignore[type-arg]
    model = SessionModel()
    model.apply_all(events)
    return model


def test_mid_run_rows_best_and_usage() -> None:
    model = _model(mid_run())
    rows = [(v.iteration, v.speedup, v.decision, v.intent, v.kernel_file) for v in model.iterations.values()]
    assert rows == [
        (0, 1.0, "keep", "baseline", "kernels/iter_0000.py"),
        (1, 0.7, "discard", "bad tiling", "kernels/iter_0001.py"),
        (2, 1.3, "keep", "shared mem", "kernels/iter_0002.py"),
        (3, None, "error", None, None),  # no kernel, so no intent was said
        (4, 1.8, "keep", "vectorized", "kernels/iter_0004.py"),
        (5, None, None, None, None),
    ]
    assert (model.best_iteration, model.best_speedup, model.kept, model.completed) == (4, 1.8, [0, 2, 4], 5)
    assert (model.phase, model.current_iteration, model.stream) == ("running", 5, "Trying register blocking next")
    assert (model.total_tokens, model.total_cost_usd) == (750, 0.05)
    assert (model.problem, model.backend, model.model, model.device, model.max_iterations) == (
        "softmax_fp32", "triton", "openai:gpt-4o", "cuda:0 (NVIDIA H200)", 10)  # fmt: skip
    assert model.latest_kernel() is model.iterations[4]
    assert model.previous_best == 2  # the latest kernel is the best: k compares it with the best before it


def test_gpu_profile_summary() -> None:
    model = _model(mid_run())
    assert model.profile == ProfileView(
        iteration=4,
        bottleneck="memory_bound",
        bandwidth_pct_of_peak=100 * (8_000_000 / (0.1 / 1.8 / 1e3)) / 4.8e12,
        l2_hit_rate_pct=None,
        achieved_occupancy_pct=None,
        headroom=(0.1 / 1.8) / (8_000_000 / 4.8e12 * 1e3),
        sol_time_ms=8_000_000 / 4.8e12 * 1e3,
        timing_valid=True,
        arithmetic_intensity=1.25,
        flops=10_000_000,
        peak_flops_per_s=67e12,
        compute_ceiling="fp32",
        bandwidth_bytes_per_s=4.8e12,
        op_classes_ops=("aten._softmax",),
    )
    assert model.timings_are_gpu is True
    assert profile_text(model).plain.splitlines() == [
        "Bottleneck: memory_bound",
        "Bandwidth:  3% of peak",
        "L2 hit:     —",
        "Occupancy:  —",
        "Headroom:   ~33.3x",
        "speed of light 0.00167 ms",
    ]


def test_cpu_timings_are_said_to_be_not_gpu_timings() -> None:
    model = _model([started(CPU), *iteration(0, "keep", 1.2, 0, gpu=False)])
    assert model.timings_are_gpu is False
    assert profile_text(model).plain.splitlines() == [
        "Bottleneck: memory_bound",  # the critic's, since the CPU time gives the roofline none
        "Bandwidth:  —",
        "L2 hit:     —",
        "Occupancy:  —",
        "Headroom:   —",
        "⚠ not GPU timings: wall clock on the CPU under the Triton interpreter",
    ]
    assert trajectory_text(model, 20).plain.splitlines()[2] == "best 1.20x (#0 ★) · not GPU timings  ↑keep ·disc ×err"
    assert ChatLine("ok", "✓ Correct · 1.20x (not GPU timings)") in model.chat


def test_chat_of_one_iteration() -> None:
    text = "Plan: fuse the passes.\n```python\nclass ModelNew: ...\n```\nDone.\n"
    model = _model([started(), *iteration(0, "keep", 1.5, 0, intent="fused", text=text)])
    assert list(model.chat) == [
        ChatLine("info", "» session s-1: softmax_fp32 on cuda:0 (NVIDIA H200), triton, openai:gpt-4o"),
        ChatLine("info", "» iteration #0 started"),
        ChatLine("generator", "Plan: fuse the passes."),
        ChatLine("generator", "Done."),
        ChatLine("generator", "› #0 proposed: fused"),
        ChatLine("ok", "✓ Correct · 1.50x"),
        ChatLine("critic", 'Critic: "The kernel reads its input twice. Next: fuse the two passes."'),
        ChatLine("up", "↑ keep #0: — → 1.50x"),
    ]


def test_failed_evaluation_and_discard_lines() -> None:
    model = _model([started(), *iteration(0, "keep", 1.0, 0), *iteration(1, "error", None, 0)])
    model.apply_all(iteration(2, "discard", 0.9, 0))
    bad = [line for line in model.chat if line.kind in ("bad", "warn")]
    assert bad == [
        ChatLine("bad", "✗ error #1: incorrect"),
        ChatLine("warn", "· discard #2: not faster than the best"),
    ]
    model.apply_all(iteration(3, "error", 0.0, 0))  # evaluated, and wrong
    assert ChatLine("bad", "✗ incorrect: incorrect: output differs at 3 elements") in model.chat


def test_dirty_panels_and_changed_rows_are_drained_once() -> None:
    model = _model(mid_run())
    model.take_dirty()
    model.take_changed_rows()
    model.apply_all(iteration(5, "discard", 1.1, 4)[3:])  # the rest of iteration 5: kernel, evaluation, decision
    assert model.take_dirty() == {"chat", "header", "log", "profile", "stream", "trajectory"}
    assert [v.iteration for v in model.take_changed_rows()] == [5]
    assert (model.take_dirty(), model.take_changed_rows()) == (set(), [])
    assert (model.latest_kernel(), model.previous_best) == (model.iterations[5], 4)


def test_pause_resume_finish_phases() -> None:
    model = _model(mid_run())
    model.apply(Paused(SID, 0.0, 6, "paused by the user"))
    assert model.phase == "paused"
    model.apply(Resumed(SID, 0.0, 6, "resumed by the user", None))
    assert model.phase == "running"
    model.apply(finished())
    assert (model.phase, model.finish_reason, model.stream) == ("finished", "iteration budget spent (5 of 5)", "")
    assert list(model.chat)[-3:] == [
        ChatLine("warn", "⏸ paused: paused by the user (p resumes)"),
        ChatLine("info", "▶ resumed by the user"),
        ChatLine("info", "■ finished: iteration budget spent (5 of 5) · best 1.80x (#4) · 5 iterations"),
    ]


def test_backend_and_hints_from_iteration_started() -> None:
    model = _model([started(), IterationStarted(SID, 0.0, 0, "user hint: use float4", "cuda", ("use float4",))])
    assert (model.backend, model.iterations[0].backend) == ("cuda", "cuda")
    assert list(model.chat)[-1] == ChatLine("user", "› steering: use float4")
    old = _model([started(), IterationStarted(SID, 0.0, 0, "switch to cuda; user hint: x")])  # schema 1
    assert old.backend == "cuda"


def test_a_redone_iteration_starts_afresh() -> None:
    model = _model([started(), *iteration(0, "keep", 1.0, 0), *iteration(1, "keep", 1.5, 1)[:5]])
    assert (model.iterations[1].status, model.iterations[1].decision) == ("correct", None)
    model.apply(Resumed(SID, 0.0, 1, "resumed after the process was killed: iteration 1 is redone", None))
    model.apply(IterationStarted(SID, 0.0, 1, None, "triton", ()))
    view = model.iterations[1]
    assert (view.status, view.speedup, view.kernel_file, view.decision) == (None, None, None, None)


def test_chat_keeps_the_last_lines_and_reports_only_new_ones() -> None:
    model = SessionModel()
    for n in range(CHAT_LIMIT + 10):
        model.say("info", f"line {n}")
    assert model.chat_since(CHAT_LIMIT + 8) == [ChatLine("info", f"line {CHAT_LIMIT + 8}"),
                                                ChatLine("info", f"line {CHAT_LIMIT + 9}")]  # fmt: skip
    shown = model.chat_since(0)  # more were added than are kept: the oldest are gone
    assert (len(shown), shown[0]) == (CHAT_LIMIT, ChatLine("info", "line 10"))


def test_prose_of_leaves_code_out() -> None:
    reply = "Intent: tile\n\n```python\nimport torch\n```\nThen tune.\n" + "more\n" * 10
    assert prose_of(reply) == ["Intent: tile", "Then tune.", "more", "more", "more", "more"]


def test_trajectory_marks_every_decision_with_a_symbol() -> None:
    assert trajectory_text(_model(mid_run()), 40).plain.splitlines() == [
        "▅▄▆×█ ",
        "↑·↑×★…",
        "best 1.80x (#4 ★)  ↑keep ·disc ×err",
    ]
    assert trajectory_text(_model(mid_run()), 3).plain.splitlines()[:2] == ["×█ ", "×★…"]  # the last 3 only


def test_header_fits_the_width_by_dropping_the_least_needed() -> None:
    model = _model(mid_run())
    wide = header_text(model, 140, pending_backend="cuda", trace=False).plain
    assert wide == (
        " kernel code v0.1.0 [H200] [triton → cuda next] [softmax_fp32] ● running iter 5/10 openai:gpt-4o "
        "750 tok $0.05 trace off"
    )
    assert header_text(model, 80).plain == " kernel code v0.1.0 [H200] [triton] [softmax_fp32] ● running iter 5/10"
    assert header_text(_model([started(CPU)]), 60, read_only=True).plain == (
        " [CPU · interpreter] [triton] [softmax_fp32] ● running iter 0/10 ▷ replay"
    )


def test_l2_hit_is_judged_by_the_critic_thresholds() -> None:
    assert [judge_l2(x) for x in (45.0, 50.0, 79.9, 80.0)] == ["poor", "ok", "ok", "good"]


def test_roofline_plot_places_points_and_names_them() -> None:
    roof = Roof(4.8e12, (("fp32", 67e12),))
    points = [RoofPoint("reference", 1.25, 1e11, "R", ""), RoofPoint("#4 (best)", 1.25, 4e12, "★", "")]
    lines = plot_roofline(roof, points, 60, 12).plain.splitlines()
    plot = lines[:11]
    # The y axis runs from 10 G to 1 P: the best at 4 TFLOP/s sits above the reference at 100 GFLOP/s.
    star_row = next(i for i, line in enumerate(plot) if "★" in line)
    r_row = next(i for i, line in enumerate(plot) if "R" in line[8:])
    assert star_row < r_row
    assert plot[0].startswith("   1 P ┤") and "10 G ┤" in plot[-1]
    assert lines[-3:] == [
        "  ⣀⡠⠊ memory 4.8 TB/s · fp32 67 TFLOP/s",
        "  R reference: 100 GFLOP/s at 1.25 FLOP/byte",
        "  ★ #4 (best): 4 TFLOP/s at 1.25 FLOP/byte",
    ]


def test_side_by_side_diff_aligns_and_marks_lines() -> None:
    old = "a = 1\nb = 2\nc = 3\n"
    new = "a = 1\nb = 20\nc = 3\nd = 4\n"
    diff = side_by_side(old, new)
    assert diff.left.plain.split("\n") == ["  1 a = 1", "~ 2 b = 2", "  3 c = 3", "    "]
    assert diff.right.plain.split("\n") == ["  1 a = 1", "~ 2 b = 20", "  3 c = 3", "+ 4 d = 4"]
    assert (diff.added, diff.removed) == (2, 1)
