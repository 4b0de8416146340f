"""``OfflineGenerator``: real Triton kernels with no LLM, from templates plus a guided search.

Iteration 0 traces the reference, recognises the template that covers it (``patterns.py``) and
emits the best-guess kernel; later iterations change the launch configuration (block sizes, warps,
stages, rows per program, one-pass or looped, persistent, GROUP_M) as ``explore.py`` chooses from the
critic's diagnosis and the history. A problem no template covers gets a proposal with no source and
the reason ("no offline template for aten.convolution: ..."), which the loop records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from openkernel.generate.base import Context, Generator, Proposal
from openkernel.generate.offline.configs import Config
from openkernel.generate.offline.emit import describe, emit_candidate
from openkernel.generate.offline.explore import Step, best_and_tried, choose
from openkernel.generate.offline.patterns import Plan, recognise
from openkernel.generate.offline.trace import Trace, Uncovered, trace_reference

__all__ = ["OfflineGenerator", "Recognised", "recognise_source"]


@dataclass(frozen=True)
class Recognised:
    """A reference's trace and plan, or the reason no template covers it."""

    trace: Trace | None
    plan: Plan | None
    reason: str | None


def recognise_source(problem_source: str) -> Recognised:
    """Trace and recognise a reference file's text (the whole offline front end, for tests and the CLI)."""
    try:
        trace = trace_reference(problem_source)
        return Recognised(trace, recognise(trace), None)
    except Uncovered as why:
        return Recognised(None, None, why.reason)


class OfflineGenerator(Generator):
    """Templates and a guided configuration search; deterministic for a given context.

    Besides what the context shows (the history's intents, the best kernel's own record of what was
    tried before it), a generator remembers the configurations it proposed in this process, so a
    session longer than the history window never proposes one twice.
    """

    name = "offline"

    def __init__(self) -> None:
        self._recognised: dict[str, Recognised] = {}
        self._proposed: dict[str, list[Config]] = {}

    def propose(self, context: Context, on_text: Callable[[str], None] | None = None) -> Proposal:
        if context.backend != "triton":
            return _failed(
                f"the offline generator writes Triton kernels, not {context.backend}: use --backend triton, "
                "or --model with an LLM for CUDA"
            )
        key = hashlib.sha256(context.problem_source.encode("utf-8")).hexdigest()
        if key not in self._recognised:
            self._recognised[key] = recognise_source(context.problem_source)
        found = self._recognised[key]
        if found.plan is None or found.trace is None:
            return _failed(found.reason or "no offline template for this problem")
        plan, trace = found.plan, found.trace
        remembered = set(self._proposed.get(key, []))
        step = choose(plan, context, remembered)
        if isinstance(step, str):
            return _failed(step)
        _, tried = best_and_tried(context, step.config.family)
        before = tuple(sorted(tried | remembered, key=lambda c: c.tag()))
        try:
            source = emit_candidate(plan, step.config, trace, context.problem_source, before)
        except Uncovered as why:
            return _failed(why.reason)
        self._proposed.setdefault(key, []).append(step.config)
        text = _notes(plan, step, context)
        if on_text is not None:
            on_text(text)
        return Proposal(source=source, intent=step.intent, text=text, usage=None, error=None)


def _failed(reason: str) -> Proposal:
    return Proposal(source=None, intent="offline generator: no kernel", text=reason, usage=None, error=reason)


def _notes(plan: Plan, step: Step, context: Context) -> str:
    """What the generator did and why, for the session's log."""
    shape = "x".join(str(d) for d in plan.frame.shape)
    lines = [
        f"offline generator: {plan.template} template over [{shape}] (traced at the full size)",
        f"kernel: {describe(plan, step.config)}",
        f"this iteration: {step.intent}",
    ]
    if context.hints:
        lines.append(
            "hints read for BLOCK / warps / ROWS / stages / GROUP_M / looped / persistent: " + "; ".join(context.hints)
        )
    return "\n".join(lines) + "\n"
