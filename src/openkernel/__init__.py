"""openkernel: the engine of kernel code. No UI imports; usable from scripts and sweeps.

Public API: load a problem, evaluate a candidate kernel against it, read the result; optimise it
(``optimize``), or a whole problem set on Ray (``sweep``; Ray is imported only once a sweep runs).
"""

from __future__ import annotations

from openkernel.errors import (
    BadProblem,
    CandidateNotFound,
    ConfigError,
    InternalError,
    OpenKernelError,
    ProblemError,
    ProblemNotFound,
)
from openkernel.evaluate import EvalConfig, Evaluator, ProcessEvaluator, ScriptedEvaluator, evaluate_candidate
from openkernel.loop import Controls, LoopOptions, optimize, resume_session
from openkernel.problems import bundled_names, load_problem, load_problems
from openkernel.sweeps import resume_sweep, sweep
from openkernel.types import EvalResult, EvalStatus, KernelLaunchCount, Problem, TimingStats, TrialCheck

__version__ = "0.1.0"

__all__ = [
    "BadProblem",
    "CandidateNotFound",
    "ConfigError",
    "Controls",
    "EvalConfig",
    "EvalResult",
    "EvalStatus",
    "Evaluator",
    "InternalError",
    "KernelLaunchCount",
    "LoopOptions",
    "OpenKernelError",
    "Problem",
    "ProblemError",
    "ProblemNotFound",
    "ProcessEvaluator",
    "ScriptedEvaluator",
    "TimingStats",
    "TrialCheck",
    "__version__",
    "bundled_names",
    "evaluate_candidate",
    "load_problem",
    "load_problems",
    "optimize",
    "resume_session",
    "resume_sweep",
    "sweep",
]
