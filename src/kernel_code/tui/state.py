"""The session model: the engine's events folded into what the TUI's panels show.

No Textual here, so that it is tested on hand-made event sequences and shared by the live view, a
replay and a resume (which first folds the recorded events, then the new ones). ``apply`` marks the
panels an event changed; the app drains those marks (and the rows and chat lines added since) once
per frame, so that a burst of events costs one repaint and a session of 10,000 iterations never
rebuilds the whole log.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Literal

from openkernel.critic import Diagnosis, NextStep
from openkernel.events import (
    Decision,
    DecisionKind,
    DiagnosisMade,
    EvaluationFinished,
    Event,
    GeneratorDelta,
    IterationStarted,
    KernelProposed,
    Paused,
    Resumed,
    SessionFinished,
    SessionStarted,
    UsageUpdate,
)

__all__ = [
    "CHAT_LIMIT",
    "PANELS",
    "ChatKind",
    "ChatLine",
    "IterationView",
    "Phase",
    "ProfileView",
    "SessionModel",
    "prose_of",
]

CHAT_LIMIT = 1000  # chat lines kept (older ones scroll away for good)
STREAM_TAIL_CHARS = 4000  # of the generator's current reply, kept for the live view
PROSE_LINES = 6  # lines of the reply's prose (outside code blocks) kept in the chat after a proposal
PANELS = ("header", "chat", "stream", "trajectory", "profile", "log")

ChatKind = Literal["info", "generator", "ok", "bad", "up", "critic", "user", "warn"]
Phase = Literal["starting", "running", "paused", "finished"]


@dataclass(frozen=True)
class ChatLine:
    kind: ChatKind  # how the chat panel styles it; its text carries a symbol too (no colour-only meaning)
    text: str


@dataclass
class IterationView:
    """One row of the experiment log, filled in as its events arrive."""

    iteration: int
    intent: str | None = None
    backend: str | None = None
    kernel_file: str | None = None  # relative to the session directory
    status: str | None = None  # an EvalStatus value once evaluated
    speedup: float | None = None
    runtime_ms: float | None = None
    timing_valid: bool | None = None
    decision: DecisionKind | None = None  # None: still running
    reason: str | None = None
    achieved_flops_per_s: float | None = None  # only from a GPU timing
    reference_flops_per_s: float | None = None  # the reference's, from the same evaluation


@dataclass(frozen=True)
class ProfileView:
    """The profiling summary of the latest evaluated kernel; ``None`` fields were not measured."""

    iteration: int
    bottleneck: str | None
    bandwidth_pct_of_peak: float | None  # useful bytes / time, of the roofline's bandwidth ceiling
    l2_hit_rate_pct: float | None  # from a deep (Nsight Compute) profile; the loop's events carry none today
    achieved_occupancy_pct: float | None  # likewise
    headroom: float | None  # measured / speed-of-light time (1.0 is perfect)
    sol_time_ms: float | None
    timing_valid: bool
    # The roofline the kernel is drawn against (the `r` overlay):
    arithmetic_intensity: float | None  # FLOP per byte
    flops: int | None
    peak_flops_per_s: float | None
    compute_ceiling: str | None  # "fp32", "bf16", ...
    bandwidth_bytes_per_s: float | None
    op_classes_ops: tuple[str, ...] = ()  # the aten ops the reference runs (for the skill matcher)


@dataclass
class SessionModel:
    """Everything the panels show, updated one event at a time by :meth:`apply`."""

    session_id: str | None = None
    problem: str | None = None
    backend: str | None = None
    model: str | None = None
    device: str | None = None
    hardware_label: str | None = None
    max_iterations: int | None = None
    total_tokens: int = 0
    total_cost_usd: float | None = None
    phase: Phase = "starting"
    finish_reason: str | None = None
    current_iteration: int | None = None
    completed: int = 0
    best_iteration: int | None = None
    best_speedup: float | None = None
    kept: list[int] = field(default_factory=list)  # kept iterations in order: the best's history
    iterations: dict[int, IterationView] = field(default_factory=dict)
    profile: ProfileView | None = None
    timing_note: str | None = None  # the latest evaluation's note on its timings ("wall clock on the CPU ...")
    diagnosis: Diagnosis | None = None
    stream: str = ""  # the tail of the generator's reply for the current iteration
    chat: deque[ChatLine] = field(default_factory=lambda: deque(maxlen=CHAT_LIMIT))
    chat_total: int = 0  # chat lines ever added (the app writes those past the count it has shown)
    dirty: set[str] = field(default_factory=set)
    changed_rows: dict[int, None] = field(default_factory=dict)  # an ordered set of iterations
    _reply: list[str] = field(default_factory=list)  # the whole current reply, for its prose

    # ------------------------------------------------------------------ reading

    @property
    def timings_are_gpu(self) -> bool | None:
        """Whether the latest evaluation's timings are GPU timings; None before any evaluation."""
        for view in reversed(self.iterations.values()):
            if view.timing_valid is not None:
                return view.timing_valid
        return None

    @property
    def previous_best(self) -> int | None:
        """The best before the latest kernel: what ``k`` diffs the latest kernel against."""
        latest = self.latest_kernel()
        if latest is None:
            return None
        earlier = [i for i in self.kept if i < latest.iteration]
        return earlier[-1] if earlier else None

    def latest_kernel(self) -> IterationView | None:
        for view in reversed(self.iterations.values()):
            if view.kernel_file is not None:
                return view
        return None

    def speedups(self, last: int) -> list[tuple[int, float | None, DecisionKind | None]]:
        """(iteration, speedup, decision) of the ``last`` iterations, oldest first."""
        views = list(islice(reversed(self.iterations.values()), max(0, last)))
        return [(v.iteration, v.speedup, v.decision) for v in reversed(views)]

    def take_dirty(self) -> set[str]:
        dirty, self.dirty = self.dirty, set()
        return dirty

    def take_changed_rows(self) -> list[IterationView]:
        rows = [self.iterations[i] for i in self.changed_rows if i in self.iterations]
        self.changed_rows = {}
        return rows

    def chat_since(self, shown: int) -> list[ChatLine]:
        """Chat lines added after the first ``shown`` (the ones that scrolled away are gone)."""
        new = min(self.chat_total - shown, len(self.chat))
        return list(self.chat)[len(self.chat) - new :] if new > 0 else []

    # ------------------------------------------------------------------ folding

    def apply_all(self, events: Iterable[Event]) -> None:
        for event in events:
            self.apply(event)

    def apply(self, event: Event) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def say(self, kind: ChatKind, text: str) -> None:
        self.chat.append(ChatLine(kind, text))
        self.chat_total += 1
        self.dirty.add("chat")

    def _row(self, iteration: int) -> IterationView:
        view = self.iterations.get(iteration)
        if view is None:
            view = self.iterations[iteration] = IterationView(iteration)
        self.changed_rows[iteration] = None
        self.dirty.update(("log", "trajectory"))
        return view

    def _started(self, e: SessionStarted) -> None:
        self.session_id, self.problem, self.backend, self.model = e.session_id, e.problem_name, e.backend, e.model
        self.device, self.hardware_label = e.device, e.hardware_label
        self.max_iterations = e.config.max_iterations
        self.phase = "running"
        self.dirty.add("header")
        self.say("info", f"» session {e.session_id}: {e.problem_name} on {e.device}, {e.backend}, {e.model}")

    def _iteration(self, e: IterationStarted) -> None:
        if e.backend is not None:
            self.backend = e.backend
        elif e.intent and e.intent.startswith("switch to "):  # a schema-1 session said it in the intent
            self.backend = e.intent.removeprefix("switch to ").split(";")[0].strip()
        view = self._row(e.iteration)
        view.intent, view.backend = e.intent, self.backend
        view.decision = view.status = view.speedup = view.kernel_file = None  # a redo starts afresh
        self.current_iteration = e.iteration
        self.stream, self._reply = "", []
        self.phase = "running"
        self.dirty.update(("header", "stream"))
        self.say("info", f"» iteration #{e.iteration} started" + (f": {e.intent}" if e.intent else ""))
        for hint in e.hints:
            self.say("user", f"› steering: {hint}")

    def _delta(self, e: GeneratorDelta) -> None:
        self._reply.append(e.text)
        self.stream = (self.stream + e.text)[-STREAM_TAIL_CHARS:]
        self.dirty.add("stream")

    def _proposed(self, e: KernelProposed) -> None:
        view = self._row(e.iteration)
        view.kernel_file = e.kernel_file
        view.intent = e.intent or view.intent
        for line in prose_of("".join(self._reply)):
            self.say("generator", line)
        self.stream, self._reply = "", []
        self.dirty.add("stream")
        self.say("generator", f"› #{e.iteration} proposed: {e.intent or 'a kernel'}")

    def _evaluated(self, e: EvaluationFinished) -> None:
        r = e.result_json
        view = self._row(e.iteration)
        view.status = str(r.get("status"))
        view.speedup = _num(r.get("speedup"))
        view.runtime_ms = _num(r.get("runtime_ms"))
        view.timing_valid = bool(r.get("timing_valid"))
        self.timing_note = r.get("timing_note") if isinstance(r.get("timing_note"), str) else None
        profile = r.get("profile") if isinstance(r.get("profile"), dict) else None
        if profile is not None and view.timing_valid:
            view.achieved_flops_per_s = _num(profile.get("achieved_flops_per_s"))
            reference_ms, flops = _num(r.get("reference_runtime_ms")), _num(profile.get("flops"))
            if reference_ms and flops is not None:
                view.reference_flops_per_s = flops / (reference_ms / 1e3)
        if profile is not None:
            self.profile = _profile_view(e.iteration, r, profile)
        self.dirty.update(("profile", "header"))
        reasons = [str(x) for x in r.get("reasons") or []]
        if view.status == "correct":
            shown = f" · {view.speedup:.2f}x" if view.speedup is not None else ""
            note = "" if view.timing_valid else " (not GPU timings)"
            self.say("ok", f"✓ Correct{shown}{note}")
        else:
            self.say("bad", f"✗ {view.status}" + (f": {reasons[0]}" if reasons else ""))

    def _diagnosed(self, e: DiagnosisMade) -> None:
        self.diagnosis = _diagnosis(e.diagnosis_json)
        self.dirty.add("profile")
        self.say("critic", f'Critic: "{self.diagnosis.summary()}"')

    def _decided(self, e: Decision) -> None:
        view = self._row(e.iteration)
        view.decision, view.reason = e.decision, e.reason
        view.speedup = e.speedup if e.speedup is not None else view.speedup
        self.completed += 1
        previous = self.best_speedup
        if e.decision == "keep":
            self.kept.append(e.iteration)
        self.best_iteration = e.best_iteration
        if e.best_iteration is not None and e.best_iteration in self.iterations:
            self.best_speedup = self.iterations[e.best_iteration].speedup
        self.dirty.add("header")
        if e.decision == "keep":
            old = "—" if previous is None else f"{previous:.2f}x"
            new = "—" if e.speedup is None else f"{e.speedup:.2f}x"
            self.say("up", f"↑ keep #{e.iteration}: {old} → {new}")
        elif e.decision == "discard":
            self.say("warn", f"· discard #{e.iteration}: {e.reason}")
        else:
            self.say("bad", f"✗ error #{e.iteration}: {e.reason}")

    def _usage(self, e: UsageUpdate) -> None:
        self.total_tokens, self.total_cost_usd = e.total_tokens, e.total_cost_usd
        self.dirty.add("header")

    def _paused(self, e: Paused) -> None:
        self.phase = "paused"
        self.dirty.add("header")
        self.say("warn", f"⏸ paused: {e.reason} (p resumes)")

    def _resumed(self, e: Resumed) -> None:
        self.phase = "running"
        self.finish_reason = None
        self.dirty.add("header")
        self.say("info", f"▶ {e.reason}")

    def _finished(self, e: SessionFinished) -> None:
        self.phase, self.finish_reason = "finished", e.reason
        self.best_iteration, self.best_speedup = e.best_iteration, e.best_speedup
        self.stream = ""
        self.dirty.update(("header", "trajectory", "stream"))
        best = "no correct kernel" if e.best_speedup is None else f"best {e.best_speedup:.2f}x (#{e.best_iteration})"
        self.say("info", f"■ finished: {e.reason} · {best} · {e.iterations} iterations")


_HANDLERS: dict[type, Any] = {
    SessionStarted: SessionModel._started,
    IterationStarted: SessionModel._iteration,
    GeneratorDelta: SessionModel._delta,
    KernelProposed: SessionModel._proposed,
    EvaluationFinished: SessionModel._evaluated,
    DiagnosisMade: SessionModel._diagnosed,
    Decision: SessionModel._decided,
    UsageUpdate: SessionModel._usage,
    Paused: SessionModel._paused,
    Resumed: SessionModel._resumed,
    SessionFinished: SessionModel._finished,
}


def prose_of(reply: str, limit: int = PROSE_LINES) -> list[str]:
    """The first ``limit`` non-blank lines of ``reply`` outside code blocks (the kernel is not chat)."""
    lines: list[str] = []
    fenced = False
    for line in reply.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced and line.strip():
            lines.append(line.strip()[:200])
    return lines[:limit]


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _profile_view(iteration: int, r: dict[str, Any], p: dict[str, Any]) -> ProfileView:
    valid = bool(r.get("timing_valid"))
    achieved, bandwidth = _num(p.get("achieved_bytes_per_s")), _num(p.get("bandwidth_bytes_per_s"))
    pct = 100.0 * achieved / bandwidth if valid and achieved is not None and bandwidth else None
    flops = p.get("flops")
    ops = tuple(str(rule.get("op")) for rule in p.get("flops_by_rule") or [] if isinstance(rule, dict))
    return ProfileView(
        iteration=iteration,
        bottleneck=p.get("bottleneck") if valid else None,
        bandwidth_pct_of_peak=pct,
        l2_hit_rate_pct=None,
        achieved_occupancy_pct=None,
        headroom=_num(p.get("headroom")) if valid else None,
        sol_time_ms=_num(p.get("sol_time_ms")),
        timing_valid=valid,
        arithmetic_intensity=_num(p.get("arithmetic_intensity")),
        flops=flops if isinstance(flops, int) else None,
        peak_flops_per_s=_num(p.get("peak_flops_per_s")),
        compute_ceiling=p.get("compute_ceiling") if isinstance(p.get("compute_ceiling"), str) else None,
        bandwidth_bytes_per_s=bandwidth,
        op_classes_ops=ops,
    )


def _diagnosis(data: dict[str, Any]) -> Diagnosis:
    steps = tuple(
        NextStep(
            title=str(s["title"]),
            why=str(s["why"]),
            skill_ids=tuple(s["skill_ids"]),
            expected_effect=str(s["expected_effect"]),
            rank=int(s["rank"]),
            profile_driven=bool(s["profile_driven"]),
        )
        for s in data.get("next_steps", [])
    )
    return Diagnosis(
        bottleneck=data.get("bottleneck"),
        headline=str(data.get("headline", "")),
        evidence=tuple(data.get("evidence", ())),
        signals=tuple(data.get("signals", ())),
        changes=tuple(data.get("changes", ())),
        next_steps=steps,
        lead=str(data.get("lead", "")),
    )
