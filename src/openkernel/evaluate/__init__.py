"""Evaluation: compile, check and time a candidate kernel in isolated processes.

The seam is :class:`Evaluator` (one method, ``evaluate``); :class:`ProcessEvaluator` is the real
one (trusted parent, reference and candidate worker processes), :class:`ScriptedEvaluator` the
test double that returns results it was given, for loops and views that need no kernels run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path

from openkernel.evaluate.config import EvalConfig, default_cache_dir
from openkernel.evaluate.parent import evaluate_candidate
from openkernel.types import EvalResult, Problem

__all__ = [
    "EvalConfig",
    "Evaluator",
    "ProcessEvaluator",
    "ScriptedEvaluator",
    "default_cache_dir",
    "evaluate_candidate",
]


class Evaluator:
    """Turns (problem, candidate file) into an :class:`EvalResult`. A failing kernel is a result.

    ``backend`` ("triton" or "cuda") says what the candidate was written for, when it differs from
    the evaluator's own setting: a session can switch backends between iterations.
    """

    def evaluate(self, problem: Problem, candidate: Path, backend: str | None = None) -> EvalResult:
        raise NotImplementedError


class ProcessEvaluator(Evaluator):
    def __init__(self, config: EvalConfig | None = None) -> None:
        self.config = config or EvalConfig()

    def evaluate(self, problem: Problem, candidate: Path, backend: str | None = None) -> EvalResult:
        config = (
            self.config if backend in (None, self.config.backend) else dataclasses.replace(self.config, backend=backend)
        )
        return evaluate_candidate(problem, candidate, config)


class ScriptedEvaluator(Evaluator):
    """Returns the given results in order (or computes them with ``respond``); records every call."""

    def __init__(
        self,
        results: Iterable[EvalResult] = (),
        respond: Callable[[Problem, Path], EvalResult] | None = None,
    ) -> None:
        self._results = list(results)
        self._respond = respond
        self.calls: list[tuple[Problem, Path]] = []
        self.backends: list[str | None] = []  # the backend each call was asked for

    def evaluate(self, problem: Problem, candidate: Path, backend: str | None = None) -> EvalResult:
        self.calls.append((problem, candidate))
        self.backends.append(backend)
        if self._respond is not None:
            return self._respond(problem, candidate)
        if not self._results:
            raise IndexError("ScriptedEvaluator ran out of scripted results")
        return self._results.pop(0)
