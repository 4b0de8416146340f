"""The optimisation loop: whole event streams with scripted generators and evaluators, budgets,
controls, resume after a kill, and one real session on the CPU."""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from openkernel.critic import Diagnosis, NextStep, ScriptedCritic
from openkernel.evaluate import EvalConfig, ProcessEvaluator, ScriptedEvaluator
from openkernel.events import (
    Decision,
    DiagnosisMade,
    EvaluationFinished,
    Event,
    GeneratorDelta,
    IterationStarted,
    KernelProposed,
    Paused,
    Resumed,
    SessionConfig,
    SessionFinished,
    SessionStarted,
    UsageUpdate,
)
from openkernel.generate.base import Context, Generator, PastResult, Proposal, ScriptedGenerator, Usage
from openkernel.loop import BestKernel, Controls, LoopOptions, optimize, resume_session
from openkernel.loop.decide import DeltaBatcher, decide
from openkernel.problems import load_problem
from openkernel.store import DirectoryStore, MemoryStore
from openkernel.types import EvalResult, EvalStatus, TimingStats
from tests.conftest import KERNELS, SOLUTIONS

PROBLEM = load_problem("softmax_fp32")
NOW = 1000.0  # every event's at_unix_s
SID = "s"


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _config(**budgets: float | None) -> SessionConfig:
    base = SessionConfig("triton", "scripted", "small", None, None, None, None)
    return dataclasses.replace(base, **budgets)


def _options(tmp_path: Path, clock: FakeClock | None = None, **more: object) -> LoopOptions:
    return LoopOptions(
        clock=clock or FakeClock(),
        wall_clock=lambda: NOW,
        kernel_dir=tmp_path,
        session_id=SID,
        device="cpu (Triton interpreter)",
        **more,  # type: ignore[arg-type]
    )


def _timing(median: float, p10: float, p90: float) -> TimingStats:
    return TimingStats("wall_clock", 5, median, median, p10, p90, p10, p90, 0.1, None, None)


def _result(status: EvalStatus = EvalStatus.CORRECT, median: float = 1.0, spread: float = 0.1) -> EvalResult:
    correct = status == EvalStatus.CORRECT
    return EvalResult(
        status=status,
        reasons=("all checks passed",) if correct else ("output differs at 3 of 4096 elements " + "x" * 400,),
        problem="softmax_fp32",
        candidate="c.py",
        backend="triton",
        device="cpu (Triton interpreter)",
        size="small",
        timing_valid=False,
        timing_note=None,
        runtime_ms=median if correct else None,
        reference_runtime_ms=2.0,
        speedup=2.0 / median if correct else None,
        compile_baseline_runtime_ms=None,
        candidate_timing=_timing(median, median - spread, median + spread) if correct else None,
        reference_timing=None,
        trials=(),
        kernels_launched=(),
        candidate_aten_ops=(),
        target_compiles=(),
        profile=None,
        warnings=(),
        wall_seconds=1.0,
        log_tail="",
    )


DIAGNOSIS = Diagnosis(
    bottleneck="memory_bound",
    headline="Bottleneck: memory_bound",
    evidence=("72% of peak bandwidth",),
    signals=("low_l2_hit",),
    changes=(),
    next_steps=(NextStep("Fuse the passes", "two reads of x", ("fusion",), "1.5x", 1, True),),
    lead="The kernel reads its input twice",
)


def _proposal(source: str | None, intent: str = "try", tokens: int = 100, cost: float | None = 0.01) -> Proposal:
    error = None if source is not None else "the reply had no code block"
    return Proposal(source, intent, f"reply for {intent}", Usage(tokens, tokens // 2, cost), error)


def _kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events]


def test_three_iterations_keep_discard_error_whole_stream(tmp_path: Path) -> None:
    generator = ScriptedGenerator(
        [_proposal("A = 1\n", "one row per program"), _proposal("B = 2\n", "wider blocks"), _proposal(None, "x")]
    )
    first, second = _result(median=1.0), _result(median=0.95)  # 0.95 is within half a 0.2 ms band of 1.0: noise
    evaluator = ScriptedEvaluator([first, second])
    store = MemoryStore()
    config = _config(max_iterations=3)
    critic = ScriptedCritic([DIAGNOSIS, DIAGNOSIS])
    events = list(optimize(PROBLEM, generator, evaluator, store, config, critic, None, _options(tmp_path)))

    def sha(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    assert events == store.events
    assert events == [
        SessionStarted(
            SID, NOW, "softmax_fp32", str(PROBLEM.path), "triton", "scripted", "cpu (Triton interpreter)",
            "NVIDIA H200", config,
        ),
        IterationStarted(SID, NOW, 0, None, "triton", ()),
        GeneratorDelta(SID, NOW, 0, "reply for one row per program"),
        UsageUpdate(SID, NOW, 0, 100, 50, 0.01, 150, 0.01),
        KernelProposed(SID, NOW, 0, str(tmp_path / "iter_0000.py"), "one row per program", sha("A = 1\n")),
        EvaluationFinished(SID, NOW, 0, first.to_json()),
        DiagnosisMade(SID, NOW, 0, DIAGNOSIS.to_json()),
        Decision(SID, NOW, 0, "keep", "first correct kernel (1 ms, speedup 2x)", 2.0, 0),
        IterationStarted(SID, NOW, 1, None, "triton", ()),
        GeneratorDelta(SID, NOW, 1, "reply for wider blocks"),
        UsageUpdate(SID, NOW, 1, 100, 50, 0.01, 300, 0.02),
        KernelProposed(SID, NOW, 1, str(tmp_path / "iter_0001.py"), "wider blocks", sha("B = 2\n")),
        EvaluationFinished(SID, NOW, 1, second.to_json()),
        DiagnosisMade(SID, NOW, 1, DIAGNOSIS.to_json()),
        Decision(
            SID, NOW, 1, "discard",
            "not faster than the best (iteration 0) beyond noise: median 0.95 ms >= 0.9 ms "
            "(best 1 ms less half the wider p10-p90 band, 0.1 ms)",
            2.0 / 0.95, 0,
        ),
        IterationStarted(SID, NOW, 2, None, "triton", ()),
        GeneratorDelta(SID, NOW, 2, "reply for x"),
        UsageUpdate(SID, NOW, 2, 100, 50, 0.01, 450, 0.03),
        Decision(SID, NOW, 2, "error", "no kernel: the reply had no code block", None, 0),
        SessionFinished(SID, NOW, "iteration budget spent (3 of 3)", 0, 2.0, 3),
    ]  # fmt: skip
    assert evaluator.calls == [(PROBLEM, tmp_path / "iter_0000.py"), (PROBLEM, tmp_path / "iter_0001.py")]
    # The critic compares with the best's snapshot from the second kernel on.
    assert [best.iteration if best else None for _, best, *_ in critic.calls] == [None, 0]
    # What each prompt heard: the best, the trimmed history, the diagnosis, the last error.
    c1, c2 = generator.contexts[1], generator.contexts[2]
    assert (c1.best_source, c1.best_speedup, c1.last_error) == ("A = 1\n", 2.0, None)
    assert c1.history == (PastResult(0, "one row per program", "correct", 2.0, ("all checks passed",)),)
    assert c1.diagnosis == (
        "The kernel reads its input twice. Next: fuse the passes.\nBottleneck: memory_bound\n"
        "1. Fuse the passes: two reads of x (expected: 1.5x)"
    )
    assert c1.skills is not None and "matched:" in c1.skills
    assert [p.iteration for p in c2.history] == [0, 1]


def test_error_reasons_are_trimmed_and_the_last_error_is_told(tmp_path: Path) -> None:
    generator = ScriptedGenerator([_proposal("A\n"), _proposal(None), _proposal("C\n")])
    evaluator = ScriptedEvaluator([_result(EvalStatus.INCORRECT), _result(EvalStatus.INCORRECT)])
    critic = ScriptedCritic([DIAGNOSIS, DIAGNOSIS])
    events = list(
        optimize(PROBLEM, generator, evaluator, MemoryStore(), _config(max_iterations=3), critic, None,
                 _options(tmp_path))
    )  # fmt: skip
    decisions = [e for e in events if isinstance(e, Decision)]
    assert [(d.decision, d.best_iteration) for d in decisions] == [("error", None), ("error", None), ("error", None)]
    assert decisions[0].reason.startswith("incorrect: output differs at 3 of 4096 elements xxx")
    assert len(decisions[0].reason) == len("incorrect: ") + 300
    assert generator.contexts[1].history[0].reasons[0].endswith("x…")
    assert len(generator.contexts[1].history[0].reasons[0]) == 300
    assert generator.contexts[2].last_error == "the reply had no code block"
    assert generator.contexts[1].last_error is None


@pytest.mark.parametrize(
    ("budget", "spend", "reason", "iterations"),
    [
        ({"max_iterations": 2}, {}, "iteration budget spent (2 of 2)", 2),
        ({"token_budget": 250}, {}, "token budget spent (300 of 250 tokens)", 2),
        ({"cost_budget_usd": 0.015}, {}, "cost budget spent ($0.02 of $0.01)", 2),
        ({"cost_budget_usd": 0.015}, {"cost": None}, "iteration budget spent (4 of 4)", 4),
        ({"wall_time_budget_s": 100.0}, {"seconds": 40.0}, "wall-time budget spent (120 of 100 s)", 3),
    ],
)
def test_budgets_end_the_session(
    tmp_path: Path, budget: dict[str, float], spend: dict[str, float | None], reason: str, iterations: int
) -> None:
    clock = FakeClock()

    def respond(*_: object) -> EvalResult:
        clock.now += spend.get("seconds") or 0.0
        return _result()

    cost = spend.get("cost", 0.01)
    generator = ScriptedGenerator([_proposal(f"K{i}\n", cost=cost) for i in range(6)])
    config = _config(**{"max_iterations": 4, **budget})
    critic = ScriptedCritic([DIAGNOSIS] * 6)
    events = list(
        optimize(PROBLEM, generator, ScriptedEvaluator(respond=respond), MemoryStore(), config, critic, None,
                 _options(tmp_path, clock))
    )  # fmt: skip
    assert events[-1] == SessionFinished(SID, NOW, reason, 0, 2.0, iterations)
    assert len(generator.contexts) == iterations


class ControllingGenerator(Generator):
    """Calls ``act(iteration, controls)`` inside propose, then proposes a kernel."""

    def __init__(self, controls: Controls, act: Callable[[int, Controls], None]) -> None:
        self.controls, self.act = controls, act
        self.contexts: list[Context] = []

    def propose(self, context: Context, on_text: Callable[[str], None] | None = None) -> Proposal:
        self.contexts.append(context)
        self.act(context.iteration, self.controls)
        return Proposal(f"K{context.iteration}\n", "try", "", None, None)


def test_steer_and_switch_backend_apply_to_the_next_iteration(tmp_path: Path) -> None:
    controls = Controls()

    def act(iteration: int, c: Controls) -> None:
        if iteration == 0:
            c.steer("use fp16 accumulators")
            c.switch_backend("cuda")

    generator = ControllingGenerator(controls, act)
    evaluator = ScriptedEvaluator(respond=lambda *_: _result())
    events = list(
        optimize(PROBLEM, generator, evaluator, MemoryStore(),
                 _config(max_iterations=3), ScriptedCritic([DIAGNOSIS] * 3), controls,
                 _options(tmp_path, hints=("keep it simple",)))
    )  # fmt: skip
    assert evaluator.backends == ["triton", "cuda", "cuda"]  # each kernel is judged for what it was written for
    assert [(c.backend, c.hints) for c in generator.contexts] == [
        ("triton", ("keep it simple",)),
        ("cuda", ("use fp16 accumulators",)),
        ("cuda", ()),
    ]
    assert [(e.intent, e.backend, e.hints) for e in events if isinstance(e, IterationStarted)] == [
        (None, "triton", ("keep it simple",)),
        ("switch to cuda", "cuda", ("use fp16 accumulators",)),
        (None, "cuda", ()),
    ]
    assert controls.pending_backend is None


def test_pause_resume_and_stop(tmp_path: Path) -> None:
    controls = Controls()

    def act(iteration: int, c: Controls) -> None:
        if iteration == 0:
            c.pause()
        if iteration == 1:
            c.stop()

    stream = optimize(PROBLEM, ControllingGenerator(controls, act), ScriptedEvaluator(respond=lambda *_: _result()),
                      MemoryStore(), _config(max_iterations=5), ScriptedCritic([DIAGNOSIS] * 3), controls,
                      _options(tmp_path))  # fmt: skip
    events: list[Event] = []
    for event in stream:
        events.append(event)
        if isinstance(event, Paused):
            controls.resume()  # the loop waits after yielding Paused: this runs before it looks
    assert _kinds(events)[5:8] == ["decision", "paused", "resumed"]
    assert events[6] == Paused(SID, NOW, 1, "paused by the user")
    assert events[7] == Resumed(SID, NOW, 1, "resumed by the user", None)
    assert events[-1] == SessionFinished(SID, NOW, "stopped by the user", 0, 2.0, 2)


def test_resume_and_stop_from_another_thread(tmp_path: Path) -> None:
    controls = Controls()
    controls.pause()
    timer = threading.Timer(0.05, controls.resume)
    timer.start()
    events = list(
        optimize(PROBLEM, ScriptedGenerator([_proposal("A\n")]), ScriptedEvaluator([_result()]), MemoryStore(),
                 _config(max_iterations=1), ScriptedCritic([DIAGNOSIS]), controls, _options(tmp_path))
    )  # fmt: skip
    timer.join()
    assert _kinds(events)[:3] == ["session_started", "paused", "resumed"]
    controls.pause()
    threading.Timer(0.05, controls.stop).start()
    events = list(
        optimize(PROBLEM, ScriptedGenerator([]), ScriptedEvaluator(), MemoryStore(), _config(), None, controls,
                 _options(tmp_path))
    )  # fmt: skip
    assert _kinds(events) == ["session_started", "paused", "session_finished"]
    assert events[-1] == SessionFinished(SID, NOW, "stopped by the user", None, None, 0)


class StreamingGenerator(Generator):
    """Streams ``chunks`` as (text, seconds later) and moves the fake clock along."""

    def __init__(self, clock: FakeClock, chunks: list[tuple[str, float]]) -> None:
        self.clock, self.chunks = clock, chunks

    def propose(self, context: Context, on_text: Callable[[str], None] | None = None) -> Proposal:
        assert on_text is not None
        for text, later_s in self.chunks:
            self.clock.now += later_s
            on_text(text)
        return Proposal(None, "stream", "".join(t for t, _ in self.chunks), None, "no code")


def test_streamed_text_is_batched_by_time_and_size(tmp_path: Path) -> None:
    clock = FakeClock()
    chunks = [("a", 0.0), ("b", 0.1), ("c", 0.15), ("d", 0.0), ("efgh", 0.0), ("ijklm", 0.0), ("n", 0.0)]
    generator = StreamingGenerator(clock, chunks)
    events = list(
        optimize(PROBLEM, generator, ScriptedEvaluator(), MemoryStore(), _config(max_iterations=1), None, None,
                 _options(tmp_path, clock, delta_flush_chars=5))
    )  # fmt: skip
    # "c" arrives 0.25 s after "a": flush; "d" + "efgh" reach 5 characters; "ijklm" alone; "n" at the end.
    assert [e.text for e in events if isinstance(e, GeneratorDelta)] == ["abc", "defgh", "ijklm", "n"]


def test_delta_batcher() -> None:
    batcher = DeltaBatcher(flush_s=0.2, max_chars=10)
    assert batcher.add("ab", 1.0) is None
    assert not batcher.due(1.1)
    assert batcher.due(1.25)
    assert batcher.add("", 1.3) is None
    assert batcher.add("c", 1.3) == "abc"
    assert batcher.drain() is None
    assert batcher.add("0123456789", 5.0) == "0123456789"


def test_decide_rule() -> None:
    best = BestKernel(3, "src", 2.0, 1.0, _timing(1.0, 0.9, 1.1))
    assert decide(None, best, "no code block") == ("error", "no kernel: no code block")
    assert decide(_result(median=0.75), best) == (
        "keep",
        "faster than the best (iteration 3) beyond noise: median 0.75 ms < 0.9 ms "
        "(best 1 ms less half the wider p10-p90 band, 0.1 ms)",
    )
    assert decide(_result(median=0.9), best)[0] == "discard"  # 0.9 is not below 1.0 - 0.2 / 2
    assert decide(_result(median=0.89), best)[0] == "keep"
    assert decide(_result(median=0.89, spread=0.15), best)[0] == "discard"  # its own band is wider: limit 0.85
    assert decide(_result(median=0.84, spread=0.15), best)[0] == "keep"
    untimed = BestKernel(3, "src", 2.0, 1.0, None)
    assert decide(_result(median=0.96), untimed) == (
        "keep", "faster than the best (iteration 3): 0.96 ms < 0.97 ms (best - 3%)"
    )  # fmt: skip
    assert decide(_result(median=0.98), untimed)[0] == "discard"


def test_resume_after_a_kill_redoes_the_interrupted_iteration(tmp_path: Path) -> None:
    config = _config(max_iterations=4)
    store = DirectoryStore.create(tmp_path / "home", "softmax_fp32", config)
    first = ScriptedGenerator([_proposal("A\n", "a"), _proposal("B\n", "b"), _proposal("C\n", "c")])
    evaluator = ScriptedEvaluator([_result(median=1.0), _result(median=0.5), _result(median=0.1)])
    options = dataclasses.replace(_options(tmp_path), session_id=None)
    stream = optimize(PROBLEM, first, evaluator, store, config, ScriptedCritic([DIAGNOSIS] * 3), None, options)
    for event in stream:  # killed once iteration 2's kernel is on disk, before its evaluation ends
        if isinstance(event, KernelProposed) and event.iteration == 2:
            break
    stream.close()
    with open(store.path / "events.jsonl", "ab") as f:
        f.write(b'{"schema_version": 1, "kind": "evalu')  # the write the kill tore
    assert (store.path / "best.py").read_text() == "B\n"

    second = ScriptedGenerator([_proposal("C2\n", "c again"), _proposal("D\n", "d")])
    again = ScriptedEvaluator([_result(median=0.45), _result(median=0.2)])
    store = DirectoryStore.open(store.path)
    events = list(resume_session(store, PROBLEM, second, again, ScriptedCritic([DIAGNOSIS] * 2), None, options))
    assert events[0] == Resumed(
        store.session_id, NOW, 2, "resumed after the process was killed: iteration 2 is redone",
        '{"schema_version": 1, "kind": "evalu',
    )  # fmt: skip
    assert [(e.iteration, e.decision) for e in events if isinstance(e, Decision)] == [(2, "discard"), (3, "keep")]
    assert [e.kernel_file for e in events if isinstance(e, KernelProposed)] == [
        "kernels/iter_0002_redo1.py",
        "kernels/iter_0003.py",
    ]
    assert events[-1] == SessionFinished(store.session_id, NOW, "iteration budget spent (4 of 4)", 3, 10.0, 4)
    context = second.contexts[0]
    assert (context.iteration, context.best_source, context.best_speedup) == (2, "B\n", 4.0)
    assert [(p.iteration, p.intent) for p in context.history] == [(0, "a"), (1, "b")]
    assert context.diagnosis is not None and context.diagnosis.startswith("The kernel reads its input twice")
    totals = [e.total_tokens for e in events if isinstance(e, UsageUpdate)]
    assert totals == [600, 750]  # the killed iteration's tokens were spent: 3 x 150 before
    assert (store.path / "best.py").read_text() == "D\n"
    rows = (store.path / "results.tsv").read_text().splitlines()
    assert [r.split("\t")[:5] for r in rows[1:]] == [
        ["0", "correct", "2.000", "1", "keep"],
        ["1", "correct", "4.000", "0.5", "keep"],
        ["2", "correct", "4.444", "0.45", "discard"],
        ["3", "correct", "10.000", "0.2", "keep"],
    ]


@pytest.mark.slow
def test_real_session_on_the_cpu(tmp_path: Path) -> None:
    honest = (SOLUTIONS / "softmax_fp32.py").read_text()
    cheat = (KERNELS / "no_kernel_torch.py").read_text()
    generator = ScriptedGenerator(
        [
            Proposal(honest, "one row per program", "here it is", Usage(10, 20, None), None),
            Proposal(cheat, "call torch", "here it is", Usage(10, 20, None), None),
            Proposal(None, "nothing", "I cannot help", Usage(10, 5, None), "the reply had no code block"),
        ]
    )
    config = SessionConfig("triton", "scripted", "small", 3, None, None, None)
    store = DirectoryStore.create(tmp_path, "softmax_fp32", config)
    evaluator = ProcessEvaluator(EvalConfig(trials=2, samples=2, cache_dir=tmp_path / "cache"))
    events = list(optimize(PROBLEM, generator, evaluator, store, config))
    decisions = [e for e in events if isinstance(e, Decision)]
    assert [d.decision for d in decisions] == ["keep", "error", "error"], [d.reason for d in decisions]
    statuses = [e.result_json["status"] for e in events if isinstance(e, EvaluationFinished)]
    assert statuses == ["correct", "rejected"]
    assert (store.path / "best.py").read_text() == honest
    assert store.read_events().events == tuple(events)
    rows = [r.split("\t") for r in (store.path / "results.tsv").read_text().splitlines()]
    assert rows[0] == ["iteration", "status", "speedup", "runtime_ms", "decision", "intent", "kernel"]
    assert [(r[0], r[1], r[4], r[5], r[6]) for r in rows[1:]] == [
        ("0", "correct", "keep", "one row per program", "kernels/iter_0000.py"),
        ("1", "rejected", "error", "call torch", "kernels/iter_0001.py"),
        ("2", "", "error", "", ""),
    ]
    assert events[-1].kind == "session_finished"
