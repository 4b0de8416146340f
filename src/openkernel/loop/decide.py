"""The loop's pure parts: the keep / discard / error rule, what the next prompt hears, delta batching.

Kept apart from the loop's control flow so that each rule is a function of values, tested without
generators, evaluators or stores.
"""

from __future__ import annotations

from dataclasses import dataclass

from openkernel.critic import Diagnosis
from openkernel.events import DecisionKind
from openkernel.generate.base import PastResult
from openkernel.types import EvalResult, EvalStatus, TimingStats

__all__ = [
    "DELTA_FLUSH_CHARS",
    "DELTA_FLUSH_S",
    "NO_SPREAD_MARGIN",
    "REASONS_KEPT",
    "REASON_CHARS",
    "BestKernel",
    "DeltaBatcher",
    "decide",
    "diagnosis_text",
    "past_result",
    "trim",
]

NO_SPREAD_MARGIN = 0.03  # without timing spreads, a new kernel must be 3% faster than the best
REASON_CHARS = 300  # each evaluator reason told to the next prompt is cut to this many characters
REASONS_KEPT = 3  # reasons per past result told to the next prompt
DELTA_FLUSH_S = 0.2  # streamed text is flushed as one GeneratorDelta at least this often (seconds) ...
DELTA_FLUSH_CHARS = 2048  # ... or once this many characters are waiting


@dataclass(frozen=True)
class BestKernel:
    """The best kept kernel: what the decision rule and the next prompt need of it."""

    iteration: int
    source: str
    speedup: float | None
    runtime_ms: float | None
    timing: TimingStats | None  # the candidate's timing spread; None when not known


def decide(result: EvalResult | None, best: BestKernel | None, error: str | None = None) -> tuple[DecisionKind, str]:
    """Keep, discard or error, with the reason naming the numbers.

    - error: no kernel (``result`` None; ``error`` says why) or a status other than correct;
    - keep: correct, and nothing kept yet, or faster than the best beyond the measured noise: the new
      median is below the best's by more than half the wider of the two p10-p90 bands. Without both
      spreads: the new runtime is below the best's by ``NO_SPREAD_MARGIN``;
    - discard: correct but not faster beyond the noise (or not timed while the best was).
    """
    if result is None:
        return "error", f"no kernel: {error or 'the generator returned no source'}"
    if result.status != EvalStatus.CORRECT:
        why = f": {trim(result.reasons[0])}" if result.reasons else ""
        return "error", f"{result.status.value}{why}"
    if best is None:
        return "keep", f"first correct kernel ({_ms(result.runtime_ms)}, speedup {_x(result.speedup)})"
    new, old = result.candidate_timing, best.timing
    against = f"the best (iteration {best.iteration})"
    if new is not None and old is not None:
        # Two medians are compared, and a median moves far less than single calls do: on the H200, five
        # evaluations' medians of one kernel spread over a quarter to a third of one run's p10-p90 band
        # for memory- and compute-bound kernels, two thirds for a 5 us one (BENCHMARKS.md, fidelity).
        # Half the band: replayed on the H200 sessions of 23:12 UTC, it keeps 16 warps where they were
        # 1.0-1.7% faster (bands 1.3-2.0%) and leaves the 0.1-0.3% ties. For a 5 us kernel it is below the
        # medians' own spread (2.5% against 3.4%): a kernel no faster may be kept there.
        margin = max(new.p90_ms - new.p10_ms, old.p90_ms - old.p10_ms) / 2
        limit_ms = old.median_ms - margin
        why = f"best {old.median_ms:.4g} ms less half the wider p10-p90 band, {margin:.2g} ms"
        if new.median_ms < limit_ms:
            return (
                "keep",
                f"faster than {against} beyond noise: median {new.median_ms:.4g} ms < {limit_ms:.4g} ms ({why})",
            )
        return "discard", (
            f"not faster than {against} beyond noise: median {new.median_ms:.4g} ms >= {limit_ms:.4g} ms ({why})"
        )
    if result.runtime_ms is None:
        return "discard", f"not timed, so not comparable with {against} ({_ms(best.runtime_ms)})"
    if best.runtime_ms is None:
        return "keep", f"timed at {_ms(result.runtime_ms)}; {against} was not timed"
    limit_ms = best.runtime_ms * (1 - NO_SPREAD_MARGIN)
    if result.runtime_ms < limit_ms:
        return "keep", f"faster than {against}: {_ms(result.runtime_ms)} < {limit_ms:.4g} ms (best - 3%)"
    return "discard", f"not faster than {against}: {_ms(result.runtime_ms)} >= {limit_ms:.4g} ms (best - 3%)"


def trim(text: str, limit: int = REASON_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def past_result(iteration: int, intent: str | None, result_json: dict[str, object]) -> PastResult:
    """An evaluated iteration as the next prompt sees it (from ``EvalResult.to_json()``)."""
    reasons = result_json.get("reasons")
    speedup = result_json.get("speedup")
    return PastResult(
        iteration=iteration,
        intent=intent,
        status=str(result_json.get("status")),
        speedup=float(speedup) if isinstance(speedup, int | float) else None,
        reasons=tuple(trim(str(r)) for r in (reasons if isinstance(reasons, list) else [])[:REASONS_KEPT]),
    )


def diagnosis_text(diagnosis: Diagnosis) -> str:
    """The critic's summary and its next steps, as prompt text."""
    lines = [diagnosis.summary()]
    if diagnosis.headline:
        lines.append(diagnosis.headline)
    for step in diagnosis.next_steps:
        lines.append(f"{step.rank}. {step.title}: {step.why} (expected: {step.expected_effect})")
    return "\n".join(lines)


class DeltaBatcher:
    """Groups streamed text into deltas: one per ``flush_s`` seconds or ``max_chars`` characters.

    ``add`` takes a chunk and the clock reading when it arrived, and returns the text to flush now
    (or None); ``due`` says whether waiting text is old enough to flush; ``drain`` takes the rest.
    Decisions depend only on the readings passed in, so a fake clock makes them exact.
    """

    def __init__(self, flush_s: float = DELTA_FLUSH_S, max_chars: int = DELTA_FLUSH_CHARS) -> None:
        self.flush_s = flush_s
        self.max_chars = max_chars
        self._parts: list[str] = []
        self._size = 0
        self._since: float | None = None  # when the oldest waiting chunk arrived

    def add(self, text: str, now: float) -> str | None:
        if not text:
            return None
        if self._since is None:
            self._since = now
        self._parts.append(text)
        self._size += len(text)
        return self.drain() if self._size >= self.max_chars or self.due(now) else None

    def due(self, now: float) -> bool:
        return self._since is not None and now - self._since >= self.flush_s

    def drain(self) -> str | None:
        text = "".join(self._parts) or None
        self._parts, self._size, self._since = [], 0, None
        return text


def _ms(value: float | None) -> str:
    return f"{value:.4g} ms" if value is not None else "not timed"


def _x(value: float | None) -> str:
    return f"{value:.3g}x" if value is not None else "unknown"
