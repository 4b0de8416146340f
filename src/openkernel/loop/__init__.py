"""The optimisation loop: generator -> evaluate -> critic -> keep / discard / error, as a stream of events.

``optimize`` runs a new session and ``resume_session`` continues one a killed process left behind.
Both yield every event after appending it to the store, so whatever a viewer has shown is on disk.
One iteration::

    IterationStarted -> GeneratorDelta* -> UsageUpdate? -> KernelProposed -> EvaluationFinished
        -> DiagnosisMade -> Decision            (no kernel: ... UsageUpdate? -> Decision "error")

Between iterations the loop obeys :class:`Controls` (stop, pause, hints, backend switch) and the
session's budgets (iterations, wall time, tokens, money), finishing with ``SessionFinished``.
Kernel files: a ``DirectoryStore`` keeps them in its ``kernels/``; with any other store they go to
``LoopOptions.kernel_dir`` (or a temporary directory removed when the stream ends).
"""

from __future__ import annotations

import hashlib
import queue
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from openkernel.critic import Critic, RuleCritic, op_classes_of, snapshot_of
from openkernel.evaluate import Evaluator
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
from openkernel.generate.base import Context, Generator, Proposal
from openkernel.loop.controls import BACKENDS, Controls
from openkernel.loop.decide import (
    DELTA_FLUSH_CHARS,
    DELTA_FLUSH_S,
    BestKernel,
    DeltaBatcher,
    decide,
    diagnosis_text,
    past_result,
)
from openkernel.loop.state import LoopState, rebuild_state
from openkernel.skills.matcher import MatchQuery, match_skills, prompt_section
from openkernel.store import DirectoryStore, SessionStore
from openkernel.types import EvalResult, Problem

__all__ = [
    "BACKENDS",
    "BestKernel",
    "Controls",
    "LoopOptions",
    "LoopState",
    "optimize",
    "resume_session",
    "this_device",
]

HISTORY_SIZE = 5  # past results told to the next prompt
SKILLS_IN_PROMPT = 3  # matched skills told to the next prompt
PAUSE_POLL_S = 0.1  # how often a paused loop looks again (seconds)


@dataclass(frozen=True)
class LoopOptions:
    """How the loop runs, beyond the session's config; the defaults suit a real session."""

    clock: Callable[[], float] = time.monotonic  # seconds, for the wall-time budget and delta batching
    wall_clock: Callable[[], float] = time.time  # the events' at_unix_s
    kernel_dir: Path | None = None  # kernel files when the store is not a DirectoryStore; None: a temp dir
    session_id: str | None = None  # None: the DirectoryStore's, or "session-<unix time>"
    device: str | None = None  # for SessionStarted; None: this machine's
    hardware_label: str = "NVIDIA H200"  # the GPU the roofline is drawn for
    delta_flush_s: float = DELTA_FLUSH_S
    delta_flush_chars: int = DELTA_FLUSH_CHARS
    hints: tuple[str, ...] = field(default=())  # hints for the first iteration (e.g. from the command line)


def optimize(
    problem: Problem,
    generator: Generator,
    evaluator: Evaluator,
    store: SessionStore,
    config: SessionConfig,
    critic: Critic | None = None,
    controls: Controls | None = None,
    options: LoopOptions | None = None,
) -> Iterator[Event]:
    """Run a new session on ``problem`` until a budget is spent or the user stops it; yield each event."""
    run = _Run(problem, generator, evaluator, store, config, critic, controls, options or LoopOptions())
    state = LoopState(backend=config.backend, hints=run.options.hints)
    device = run.options.device or this_device()
    yield from run.emit(
        SessionStarted(
            run.session_id,
            run.now(),
            problem.name,
            str(problem.path),
            config.backend,
            config.model,
            device,
            run.options.hardware_label,
            config,
        )
    )
    yield from run.loop(state)


def resume_session(
    store: DirectoryStore,
    problem: Problem,
    generator: Generator,
    evaluator: Evaluator,
    critic: Critic | None = None,
    controls: Controls | None = None,
    options: LoopOptions | None = None,
) -> Iterator[Event]:
    """Continue a session from its store: completed iterations stand, an interrupted one is redone."""
    read = store.read_events()
    point = store.resume_point()
    run = _Run(problem, generator, evaluator, store, store.config, critic, controls, options or LoopOptions())
    state = rebuild_state(read.events, point, store.path, store.config.backend)
    if point.interrupted is not None:
        reason = f"resumed after the process was killed: iteration {point.interrupted} is redone"
    else:
        reason = f"resumed: iteration {point.next_iteration} runs next"
    yield from run.emit(Resumed(run.session_id, run.now(), point.next_iteration, reason, read.torn_line))
    if point.best_iteration is not None:
        store.set_best(point.best_iteration)
    yield from run.loop(state)


class _Run:
    """One pass of the loop over a session: the parts that do not change between iterations."""

    def __init__(
        self,
        problem: Problem,
        generator: Generator,
        evaluator: Evaluator,
        store: SessionStore,
        config: SessionConfig,
        critic: Critic | None,
        controls: Controls | None,
        options: LoopOptions,
    ) -> None:
        self.problem, self.generator, self.evaluator, self.store = problem, generator, evaluator, store
        self.config, self.options = config, options
        self.critic = critic or RuleCritic()
        self.controls = controls or Controls()
        default_id = store.session_id if isinstance(store, DirectoryStore) else f"session-{int(time.time())}"
        self.session_id = options.session_id or default_id
        self.problem_source = problem.path.read_text(encoding="utf-8")
        self.started_s = options.clock()

    def now(self) -> float:
        return self.options.wall_clock()

    def emit(self, event: Event) -> Iterator[Event]:
        self.store.append(event)
        yield event

    def loop(self, state: LoopState) -> Iterator[Event]:
        with tempfile.TemporaryDirectory(prefix="openkernel-kernels-") as tmp:
            kernel_dir = self.options.kernel_dir or Path(tmp)
            while True:
                if self.controls.stop_requested:
                    yield from self.finish(state, "stopped by the user")
                    return
                if self.controls.is_paused:
                    yield from self.pause(state)
                    continue
                reason = self.generator.exhausted(state.next_iteration) or self.budget_spent(state)
                if reason is not None:
                    yield from self.finish(state, reason)
                    return
                yield from self.iteration(state, kernel_dir)

    def pause(self, state: LoopState) -> Iterator[Event]:
        yield from self.emit(Paused(self.session_id, self.now(), state.next_iteration, "paused by the user"))
        paused_at_s = self.options.clock()
        while self.controls.wait_while_paused(PAUSE_POLL_S):
            pass
        state.paused_s += self.options.clock() - paused_at_s
        if not self.controls.stop_requested:
            yield from self.emit(
                Resumed(self.session_id, self.now(), state.next_iteration, "resumed by the user", None)
            )

    def budget_spent(self, state: LoopState) -> str | None:
        c = self.config
        if c.max_iterations is not None and state.completed >= c.max_iterations:
            return f"iteration budget spent ({state.completed} of {c.max_iterations})"
        elapsed_s = state.elapsed_before_s + self.options.clock() - self.started_s - state.paused_s
        if c.wall_time_budget_s is not None and elapsed_s >= c.wall_time_budget_s:
            return f"wall-time budget spent ({elapsed_s:.0f} of {c.wall_time_budget_s:.0f} s)"
        if c.token_budget is not None and state.total_tokens >= c.token_budget:
            return f"token budget spent ({state.total_tokens} of {c.token_budget} tokens)"
        cost = state.total_cost_usd
        if c.cost_budget_usd is not None and cost is not None and cost >= c.cost_budget_usd:
            return f"cost budget spent (${cost:.2f} of ${c.cost_budget_usd:.2f})"
        return None

    def finish(self, state: LoopState, reason: str) -> Iterator[Event]:
        best = state.best
        yield from self.emit(
            SessionFinished(
                self.session_id,
                self.now(),
                reason,
                best.iteration if best else None,
                best.speedup if best else None,
                state.completed,
            )
        )

    def iteration(self, state: LoopState, kernel_dir: Path) -> Iterator[Event]:
        it = state.next_iteration
        switched = self.controls.take_backend()
        if switched is not None:
            state.backend = switched
        hints = (*state.hints, *self.controls.take_hints())
        state.hints = ()
        intent = f"switch to {switched}" if switched else None
        yield from self.emit(IterationStarted(self.session_id, self.now(), it, intent, state.backend, hints))
        context = self.context(state, hints)
        proposal: Proposal | None = None
        for item in self.propose(context):
            if isinstance(item, str):
                yield from self.emit(GeneratorDelta(self.session_id, self.now(), it, item))
            else:
                proposal = item
        assert proposal is not None
        if proposal.prompt is not None and isinstance(self.store, DirectoryStore):
            self.store.write_prompt(it, proposal.prompt)  # for traces, also ones exported later
        if proposal.usage is not None:
            u = proposal.usage
            state.total_tokens += u.prompt_tokens + u.completion_tokens
            if u.cost_usd is not None:
                state.total_cost_usd = (state.total_cost_usd or 0.0) + u.cost_usd
            yield from self.emit(
                UsageUpdate(
                    self.session_id,
                    self.now(),
                    it,
                    u.prompt_tokens,
                    u.completion_tokens,
                    u.cost_usd,
                    state.total_tokens,
                    state.total_cost_usd,
                )
            )
        result: EvalResult | None = None
        if proposal.source is not None:
            path, kernel_file = self.write_kernel(it, proposal.source, kernel_dir)
            digest = hashlib.sha256(proposal.source.encode("utf-8")).hexdigest()
            yield from self.emit(KernelProposed(self.session_id, self.now(), it, kernel_file, proposal.intent, digest))
            result = self.evaluator.evaluate(self.problem, path, state.backend)
            result_json = result.to_json()
            yield from self.emit(EvaluationFinished(self.session_id, self.now(), it, result_json))
            if result.profile is not None:
                state.op_classes = op_classes_of(r.op for r in result.profile.flop_count.by_rule) or state.op_classes
            snapshot = snapshot_of(result, it, proposal.intent)
            diagnosis = self.critic.critique(snapshot, state.best_snapshot, state.op_classes, None, state.backend)
            state.diagnosis = diagnosis
            yield from self.emit(DiagnosisMade(self.session_id, self.now(), it, diagnosis.to_json()))
            state.history.append(past_result(it, proposal.intent, result_json))
        kind, reason = decide(result, state.best, proposal.error)
        if kind == "keep" and result is not None and proposal.source is not None:
            state.best = BestKernel(it, proposal.source, result.speedup, result.runtime_ms, result.candidate_timing)
            state.best_snapshot = snapshot_of(result, it, proposal.intent)
        state.last_error = proposal.error if proposal.source is None else None
        state.completed += 1
        state.next_iteration = it + 1
        best_iteration = state.best.iteration if state.best else None
        yield from self.emit(
            Decision(self.session_id, self.now(), it, kind, reason, result.speedup if result else None, best_iteration)
        )
        if isinstance(self.store, DirectoryStore):
            if kind == "keep":
                self.store.set_best(it)
            self.store.results_tsv()

    def context(self, state: LoopState, hints: tuple[str, ...]) -> Context:
        skills = None
        if state.diagnosis is not None:
            d = state.diagnosis
            query = MatchQuery(state.op_classes, d.bottleneck, d.signals, None, state.backend)
            matches = match_skills(query, limit=SKILLS_IN_PROMPT)
            skills = prompt_section(matches, state.backend) if matches else None
        best = state.best
        return Context(
            iteration=state.next_iteration,
            problem_name=self.problem.name,
            problem_source=self.problem_source,
            backend=state.backend,
            best_source=best.source if best else None,
            best_speedup=best.speedup if best else None,
            history=tuple(state.history[-HISTORY_SIZE:]),
            diagnosis=diagnosis_text(state.diagnosis) if state.diagnosis is not None else None,
            skills=skills,
            hints=hints,
            last_error=state.last_error,
        )

    def propose(self, context: Context) -> Iterator[str | Proposal]:
        """Run the generator on a thread; yield batched text as it streams, then the proposal."""
        clock = self.options.clock
        chunks: queue.Queue[tuple[str, float] | None] = queue.Queue()
        outcome: list[Proposal | BaseException] = []

        def work() -> None:
            try:
                outcome.append(self.generator.propose(context, lambda text: chunks.put((text, clock()))))
            except BaseException as err:
                outcome.append(err)
            finally:
                chunks.put(None)

        thread = threading.Thread(target=work, name="openkernel-generator", daemon=True)
        thread.start()
        batcher = DeltaBatcher(self.options.delta_flush_s, self.options.delta_flush_chars)
        while True:
            try:
                item = chunks.get(timeout=self.options.delta_flush_s)
            except queue.Empty:
                text = batcher.drain() if batcher.due(clock()) else None
            else:
                if item is None:
                    break
                text = batcher.add(*item)
            if text is not None:
                yield text
        thread.join()
        rest = batcher.drain()
        if rest is not None:
            yield rest
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        yield outcome[0]

    def write_kernel(self, iteration: int, source: str, kernel_dir: Path) -> tuple[Path, str]:
        """The kernel's file and its name for KernelProposed (relative to a DirectoryStore's directory)."""
        if isinstance(self.store, DirectoryStore):
            path = self.store.write_kernel(iteration, source)
            return path, path.relative_to(self.store.path).as_posix()
        kernel_dir.mkdir(parents=True, exist_ok=True)
        path = kernel_dir / f"iter_{iteration:04d}.py"
        path.write_text(source, encoding="utf-8")
        return path, str(path)


def this_device() -> str:
    """This machine's device as a session records it: ``cuda:0 (NVIDIA H200)``, or the interpreter."""
    if torch.cuda.is_available():
        return f"cuda:0 ({torch.cuda.get_device_name(0)})"
    return "cpu (Triton interpreter)"
