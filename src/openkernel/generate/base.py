"""The generator seam: one small base class with one method, and a test double beside it.

A generator turns a :class:`Context` (the problem, the best kernel so far, recent results, the
critic's diagnosis, matched skills, the user's hints) into a :class:`Proposal` (a candidate file's
source and the intent behind it). Streaming text goes to ``on_text`` as it arrives, so views can
show it live; token usage comes back with the proposal. A generator that cannot produce a kernel
returns a proposal with ``source=None`` and an ``error`` (a failed proposal is data, like a
failing kernel); only user errors (a missing key, an unknown model) raise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["Context", "Generator", "PastResult", "Proposal", "ScriptedGenerator", "Usage"]


@dataclass(frozen=True)
class PastResult:
    """One earlier iteration, trimmed to what helps the next proposal."""

    iteration: int
    intent: str | None
    status: str  # EvalStatus value
    speedup: float | None
    reasons: tuple[str, ...]  # the evaluator's reasons, trimmed


@dataclass(frozen=True)
class Context:
    """Everything a generator may use for one proposal."""

    iteration: int
    problem_name: str
    problem_source: str  # the reference file's text
    backend: str  # "triton" or "cuda"
    best_source: str | None  # the best correct kernel so far
    best_speedup: float | None
    history: tuple[PastResult, ...]  # most recent last
    diagnosis: str | None  # the critic's summary and next steps, as text
    skills: str | None  # matched skills, as prompt text (openkernel.skills.matcher.prompt_section)
    hints: tuple[str, ...]  # the user's steering, newest last; the next proposal must take them into account
    last_error: str | None  # why the previous proposal could not be used (no code block, wrong class, ...)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None: no price known for the model


@dataclass(frozen=True)
class Proposal:
    source: str | None  # a complete candidate file defining ModelNew; None when none could be made
    intent: str  # what optimisation was attempted, in a few words
    text: str  # the full reply (or notes) behind it
    usage: Usage | None
    error: str | None  # why ``source`` is None: recorded, and told to the next prompt
    prompt: str | None = None  # the full prompt sent (system and user), for traces; None: no prompt (not an LLM)


class Generator:
    """Proposes the next kernel. ``name`` labels it in sessions and traces."""

    name = "generator"

    def propose(self, context: Context, on_text: Callable[[str], None] | None = None) -> Proposal:
        raise NotImplementedError

    def exhausted(self, iteration: int) -> str | None:
        """Why there is nothing to propose for ``iteration`` (the session then ends with this reason); None: go on.

        Most generators never run out. One with a fixed list (a replay) says so here, before the loop
        starts an iteration it could not fill. Keyed by iteration, not by calls, so a resume agrees.
        """
        return None


class ScriptedGenerator(Generator):
    """Returns the given proposals in order (streaming each one's text); records every context."""

    name = "scripted"

    def __init__(self, proposals: Iterable[Proposal]) -> None:
        self._proposals = list(proposals)
        self.contexts: list[Context] = []

    def propose(self, context: Context, on_text: Callable[[str], None] | None = None) -> Proposal:
        self.contexts.append(context)
        if not self._proposals:
            raise IndexError("ScriptedGenerator ran out of scripted proposals")
        proposal = self._proposals.pop(0)
        if on_text is not None and proposal.text:
            on_text(proposal.text)
        return proposal
