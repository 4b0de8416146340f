"""``kernel-code optimize`` and ``kernel-code resume``: run (or continue) a session, headless for now.

Until the TUI exists, progress is printed line by line (rich). The session is recorded in its
directory as it runs; ``resume`` continues one, also after the process was killed.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rich.console import Console

from kernel_code.arguments import positive_float
from openkernel import EvalConfig, ProcessEvaluator, load_problem, optimize, resume_session
from openkernel.errors import ConfigError
from openkernel.events import (
    Decision,
    EvaluationFinished,
    Event,
    IterationStarted,
    KernelProposed,
    Paused,
    Resumed,
    SessionConfig,
    SessionFinished,
    SessionStarted,
    UsageUpdate,
)
from openkernel.generate import Generator
from openkernel.generate.human import HumanGenerator
from openkernel.generate.llm import LLMConfig, LLMGenerator, resolve_key
from openkernel.store import DirectoryStore, default_home

__all__ = ["add_parsers", "run_optimize", "run_resume"]

_NO_MODEL = (
    "no model chosen: pass --model openai:MODEL or --model anthropic:MODEL (with OPENAI_API_KEY or "
    "ANTHROPIC_API_KEY set), or --model human to write the kernels yourself (the offline generator is not built yet)"
)


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    opt: argparse.ArgumentParser = subparsers.add_parser("optimize", help="run an optimisation session on a problem")
    opt.add_argument("problem", help="problem file, bundled problem name, or KernelBench id like L1#23")
    opt.add_argument("--backend", choices=["triton", "cuda"], default="triton")
    opt.add_argument("--model", default=None, help="openai:MODEL, anthropic:MODEL, human[:FILE]")
    opt.add_argument("--base-url", default=None, help="an OpenAI-compatible server (vLLM, Ollama, OpenRouter...)")
    opt.add_argument("--iterations", type=int, default=10, help="iteration budget")
    opt.add_argument("--session-dir", type=Path, default=None, help="put the session exactly here")
    opt.add_argument("--headless", action="store_true", help="print progress instead of the TUI (the only mode yet)")
    opt.add_argument("--timeout", type=positive_float, default=300.0, help="seconds for each candidate's evaluation")
    opt.add_argument("--size", choices=["auto", "full", "small"], default="auto")
    opt.add_argument("--kernelbench", type=Path, default=None, help="a KernelBench checkout, for ids like L1#23")
    res: argparse.ArgumentParser = subparsers.add_parser("resume", help="continue a recorded session")
    res.add_argument("session", help="a session directory, or a session id under the sessions home")
    res.add_argument("--model", default=None, help="the generator to continue with (default: the session's)")
    res.add_argument("--base-url", default=None)
    res.add_argument("--headless", action="store_true")
    res.add_argument("--timeout", type=positive_float, default=300.0)
    res.add_argument("--kernelbench", type=Path, default=None)


def _generator(model: str | None, base_url: str | None, session_dir: Path) -> Generator:
    if model is None or model == "offline":
        raise ConfigError(_NO_MODEL)
    if model == "human" or model.startswith("human:"):
        path = Path(model.partition(":")[2]) if ":" in model else session_dir / "candidate.py"
        return HumanGenerator(path)
    provider, sep, name = model.partition(":")
    if not sep or provider not in ("openai", "anthropic") or not name:
        raise ConfigError(f"unknown model {model!r}: {_NO_MODEL}")
    config = LLMConfig(provider=provider, model=name, base_url=base_url)
    return LLMGenerator(config, resolve_key(config, dict(os.environ)))


def run_optimize(args: argparse.Namespace) -> int:
    problem = load_problem(args.problem, kernelbench=args.kernelbench)
    if args.iterations < 1:
        raise ConfigError("--iterations must be at least 1")
    config = SessionConfig(
        backend=args.backend,
        model=args.model or "offline",
        size=args.size,
        max_iterations=args.iterations,
        wall_time_budget_s=None,
        token_budget=None,
        cost_budget_usd=None,
    )
    if args.session_dir is not None:
        store = DirectoryStore.create_at(args.session_dir, problem.name, config)
    else:
        store = DirectoryStore.create(default_home(), problem.name, config)
    generator = _generator(args.model, args.base_url, store.path)
    evaluator = ProcessEvaluator(EvalConfig(backend=args.backend, size=args.size, timeout_s=args.timeout))
    console = Console()
    console.print(f"session {store.session_id} in {store.path}", markup=False, highlight=False)
    for event in optimize(problem, generator, evaluator, store, config):
        _print(event, console)
    return 0


def run_resume(args: argparse.Namespace) -> int:
    path = Path(args.session)
    if not path.is_dir():
        path = default_home() / args.session
    store = DirectoryStore.open(path)
    started = next((e for e in store.read_events().events if isinstance(e, SessionStarted)), None)
    if started is None:
        raise ConfigError(f"{path} has no recorded start: it cannot be resumed, start a new session")
    problem = load_problem(started.problem_path if Path(started.problem_path).is_file() else started.problem_name,
                           kernelbench=args.kernelbench)  # fmt: skip
    generator = _generator(args.model or store.config.model, args.base_url, store.path)
    evaluator = ProcessEvaluator(EvalConfig(backend=store.config.backend, size=store.config.size,
                                            timeout_s=args.timeout))  # fmt: skip
    console = Console()
    for event in resume_session(store, problem, generator, evaluator):
        _print(event, console)
    return 0


def _print(event: Event, console: Console) -> None:
    line = _line(event)
    if line:
        console.print(line, markup=False, highlight=False)


def _line(event: Event) -> str | None:
    if isinstance(event, SessionStarted):
        return f"started: {event.problem_name} · {event.backend} · {event.model} · {event.device}"
    if isinstance(event, IterationStarted):
        return f"#{event.iteration} started" + (f" ({event.intent})" if event.intent else "")
    if isinstance(event, KernelProposed):
        return f"#{event.iteration} proposed: {event.intent} -> {event.kernel_file}"
    if isinstance(event, EvaluationFinished):
        result = event.result_json
        speedup = result.get("speedup")
        valid = "" if result.get("timing_valid") else " (not a GPU timing)"
        shown = f" · {speedup:.2f}x{valid}" if isinstance(speedup, float) else ""
        reasons = result.get("reasons") or [""]
        return f"#{event.iteration} {result.get('status')}{shown} · {reasons[0]}"
    if isinstance(event, Decision):
        return f"#{event.iteration} {event.decision}: {event.reason}"
    if isinstance(event, UsageUpdate):
        cost = "" if event.total_cost_usd is None else f" · ${event.total_cost_usd:.4f}"
        return f"tokens so far: {event.total_tokens:,}{cost}"
    if isinstance(event, Paused | Resumed):
        return f"{type(event).__name__.lower()}: {event.reason}"
    if isinstance(event, SessionFinished):
        best = "no correct kernel" if event.best_speedup is None else f"best {event.best_speedup:.2f}x"
        return f"finished: {event.reason} · {best} (iteration {event.best_iteration})"
    return None
