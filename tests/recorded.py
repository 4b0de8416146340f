"""Recording real sessions on the CPU for the replay tests: scripted proposals, the real evaluator."""

from __future__ import annotations

from pathlib import Path

from openkernel.evaluate import EvalConfig, ProcessEvaluator
from openkernel.events import Event, SessionConfig
from openkernel.generate.base import Proposal, ScriptedGenerator
from openkernel.loop import LoopOptions, optimize
from openkernel.problems import load_problem
from openkernel.store import DirectoryStore
from tests.conftest import KERNELS, SOLUTIONS

HONEST = (SOLUTIONS / "softmax_fp32.py").read_text()
BROKEN = (KERNELS / "syntax_error.py").read_text()
# What a recorded session proposes: an honest kernel, a broken one, and a reply without code.
PROPOSALS = (
    Proposal(HONEST, "one row per program", "here it is", None, None),
    Proposal(BROKEN, "forgot a parenthesis", "here it is", None, None),
    Proposal(None, "", "I cannot help", None, "the reply had no code block"),
)


def fast_evaluator(cache_dir: Path) -> ProcessEvaluator:
    """The real evaluator with few trials and samples: seconds per kernel on the CPU."""
    return ProcessEvaluator(EvalConfig(trials=2, samples=2, cache_dir=cache_dir))


def record(path: Path, proposals: tuple[Proposal, ...] = PROPOSALS, device: str | None = None) -> list[Event]:
    """Run a real session on softmax_fp32 at ``path`` that proposes ``proposals``; its events.

    ``device`` labels the session's start as if it had run there (None: this machine's).
    """
    config = SessionConfig("triton", "scripted", "small", len(proposals), None, None, None)
    store = DirectoryStore.create_at(path, "softmax_fp32", config)
    generator = ScriptedGenerator(proposals)
    evaluator = fast_evaluator(path.parent / "cache")
    options = LoopOptions(device=device)
    return list(optimize(load_problem("softmax_fp32"), generator, evaluator, store, config, options=options))
