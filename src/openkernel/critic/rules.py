"""``diagnose``: the rule-based critic's one pure function, from a snapshot (and the previous best) to a diagnosis.

Three paths: a failing kernel gets "fix it first" and nothing about speed; a kernel with a GPU timing
on the roofline gets the bottleneck, its evidence and ranked steps; one without (the interpreter, a
compile-only check, an unknown GPU) gets what the counts and static figures support, and op-class
suggestions marked as not profile-driven.
"""

from __future__ import annotations

from collections.abc import Sequence

from openkernel.critic.facts import Facts, changes, headline, pct_text, times_text
from openkernel.critic.model import Diagnosis, NextStep, Snapshot
from openkernel.critic.steps import next_steps
from openkernel.skills.library import Skill

__all__ = ["diagnose"]

_RUNS = ("correct", "compiled")  # statuses that are not failures ("compiled": CUDA built, no GPU to run it)
# Per failing status: the step's title and what fixing it buys.
_FIX: dict[str, str] = {
    "incorrect": "Fix correctness first: the output does not match the reference",
    "compile_error": "Fix the compile error first",
    "runtime_error": "Fix the runtime error first",
    "timeout": "Fix the hang first: the kernel did not finish in time",
    "rejected": "Do the work in the candidate's own kernels: the integrity check rejected it",
}


def diagnose(
    current: Snapshot,
    best: Snapshot | None,
    op_classes: tuple[str, ...],
    hardware: str | None = None,
    backend: str | None = None,
    skills: Sequence[Skill] | None = None,
) -> Diagnosis:
    """The critic's diagnosis of ``current``, compared with ``best`` (the previous best; None for the first).

    ``hardware`` ("sm_90") and ``backend`` ("triton") narrow the skills; ``skills`` None is the packaged library.
    """
    if current.status not in _RUNS:
        return _failing(current, best)
    facts = Facts.of(current, op_classes)
    evidence = facts.evidence if facts.bottleneck is not None else (*_unprofiled(current), *facts.evidence)
    changed: tuple[str, ...] = ()
    highlight = None
    if best is not None and best.iteration != current.iteration:
        changed, highlight = changes(facts, current, Facts.of(best, op_classes), best)
    return Diagnosis(
        bottleneck=facts.bottleneck,
        headline=headline(facts),
        evidence=evidence,
        signals=facts.signals,
        changes=changed,
        next_steps=next_steps(facts, hardware, backend, skills),
        lead=highlight or _state(current, facts),
    )


def _unprofiled(snap: Snapshot) -> tuple[str, ...]:
    """Why there is no bottleneck: what kind of timing this was, and what the roofline alone says."""
    roof, runtime = snap.roofline, snap.runtime_ms
    if snap.status == "compiled":
        timing = "compiled but not run: there is no GPU to time it on, so the bottleneck cannot be told"
    elif runtime is None:
        timing = "no GPU timing, so the bottleneck cannot be told"
    elif roof is None:
        timing = f"runtime {runtime:.4g} ms cannot be placed against a ceiling without a roofline"
    else:
        timing = (
            f"runtime {runtime:.4g} ms is not a GPU timing of the target (the interpreter, or another GPU), "
            "so it says nothing about the bottleneck"
        )
    if roof is None:
        return (timing, "no roofline: the problem's work was not counted, or the GPU is not in the hardware table")
    return (timing, roof.evidence[0])


def _state(snap: Snapshot, facts: Facts) -> str:
    roof = facts.roofline
    if facts.bottleneck is None or roof is None or roof.pct_of_peak is None:
        return "Compiled, not run" if snap.status == "compiled" else "No GPU profile"
    headroom = "" if roof.headroom is None else f" ({times_text(roof.headroom)} headroom)"
    return f"Bottleneck {facts.bottleneck} at {pct_text(roof.pct_of_peak)} of the {roof.bound_by} ceiling{headroom}"


def _failing(snap: Snapshot, best: Snapshot | None) -> Diagnosis:
    """A kernel that did not pass: no roofline talk, only what failed and to fix it first."""
    status = snap.status
    said = [f"status {status}: {reason}" for reason in snap.reasons]
    steps = [
        NextStep(
            _FIX.get(status, f"Fix the {status} first"),
            said[0] if said else f"status {status}",
            (),
            "a kernel that passes, so that it can be timed and profiled",
            1,
            False,
        )
    ]
    if best is not None and best.status == "correct" and best.runtime_ms is not None:
        steps.append(
            NextStep(
                f"Or start again from the best kernel: iteration {best.iteration} at {best.runtime_ms:.4g} ms",
                f"iteration {best.iteration} is correct at {best.runtime_ms:.4g} ms"
                + (f" ({best.speedup:.2f}x the reference)" if best.speedup is not None else ""),
                (),
                "a known-good starting point",
                2,
                False,
            )
        )
    return Diagnosis(
        bottleneck=None,
        headline=f"Status: {status} · not timed: fix it before optimising",
        evidence=tuple(said) or (f"status {status}: not timed or profiled",),
        signals=(),
        changes=(f"status {best.status} -> {status}",) if best is not None and best.status != status else (),
        next_steps=tuple(steps),
        lead=f"Failed ({status})",
    )
