"""Test-only entry point: the real ``kernel-code`` command, with a scripted generator and a slow evaluator.

``python -m tests.kernel_code.tui.tmux_entry optimize softmax_fp32 ...`` runs ``kernel_code.cli.main``
unchanged except for the two parts that would need a model and minutes of CPU evaluation: the
generator proposes a fixed kernel with some prose, and each evaluation takes ``EVAL_S`` seconds and
returns a CPU-style result from a fixed list of speedups. Everything else (the TUI, the loop, the
session directory, the controls) is what a user runs.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from kernel_code import cli, optimize_cmd
from openkernel.evaluate import Evaluator
from openkernel.generate.base import Generator, Proposal, ScriptedGenerator
from openkernel.types import EvalResult, Problem
from tests.conftest import SOLUTIONS
from tests.kernel_code.tui.pilot import cpu_result

EVAL_S = 0.8  # seconds each evaluation takes, so that iterations arrive one by one
SPEEDUPS: list[float | None] = [1.0, 1.5, 0.8, 1.7, None, 1.2, 1.9, 1.1] * 5


class SlowEvaluator(Evaluator):
    def __init__(self) -> None:
        self.calls = 0

    def evaluate(self, problem: Problem, candidate: Path, backend: str | None = None) -> EvalResult:
        time.sleep(EVAL_S)
        speedup = SPEEDUPS[self.calls % len(SPEEDUPS)]
        self.calls += 1
        return cpu_result(speedup)


def _generator(*_args: object) -> Generator:
    source = (SOLUTIONS / "softmax_fp32.py").read_text()
    reply = "Idea {n}: one row per program.\n```python\n...\n```\n"
    proposals = [
        Proposal(source.replace("BLOCK", f"BLOCK{n}") if n % 2 else source, f"idea {n}", reply.format(n=n), None, None)
        for n in range(len(SPEEDUPS))
    ]
    return ScriptedGenerator(proposals)


if __name__ == "__main__":
    optimize_cmd.build_generator = _generator  # type: ignore[assignment]
    optimize_cmd.build_evaluator = lambda *_args: SlowEvaluator()  # type: ignore[assignment]
    sys.exit(cli.main(sys.argv[1:]))
