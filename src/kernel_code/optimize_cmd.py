"""``kernel-code optimize`` and ``kernel-code resume``: run (or continue) a session.

The session opens in the TUI (``kernel_code.tui.launch``), or with ``--headless`` its progress is
printed line by line (rich). The session is recorded in its directory as it runs; ``resume``
continues one, also after the process was killed.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from rich.console import Console

from kernel_code.arguments import positive_float
from kernel_code.models import CRITIC_HELP, MODEL_HELP
from kernel_code.traces_cmd import capturing
from kernel_code.tui import require_terminal
from openkernel import load_problem, optimize, resume_session
from openkernel.errors import ConfigError
from openkernel.events import (
    Decision,
    EvaluationFinished,
    Event,
    IterationStarted,
    KernelProposed,
    Paused,
    Resumed,
    SessionFinished,
    SessionStarted,
    UsageUpdate,
)
from openkernel.launch import (
    SessionPlan,
    build_critic,
    build_evaluator,
    build_generator,
    provider_base_url,
    session_plan,
)
from openkernel.settings import Settings, default_model, key_environment, load_settings, with_flags
from openkernel.store import DirectoryStore

__all__ = ["add_parsers", "apply_settings", "print_event", "run_optimize", "run_resume"]

_CAPTURE_HELP = "when the session ends, write its traces (Parquet, secrets scrubbed) to the traces dir (traces.enabled)"


def add_parsers(subparsers: argparse._SubParsersAction[Any]) -> None:
    opt: argparse.ArgumentParser = subparsers.add_parser("optimize", help="run an optimisation session on a problem")
    opt.add_argument("problem", help="problem file, bundled problem name, or KernelBench id like L1#23")
    opt.add_argument("--backend", choices=["triton", "cuda"], default=None, help="default: triton, or the settings'")
    opt.add_argument("--model", default=None, help=MODEL_HELP)
    opt.add_argument("--base-url", default=None, help="an OpenAI-compatible server (vLLM, Ollama, OpenRouter...)")
    opt.add_argument("--iterations", type=int, default=None, help="iteration budget (default: 10, or the settings')")
    opt.add_argument("--session-dir", type=Path, default=None, help="put the session exactly here")
    opt.add_argument("--headless", action="store_true", help="print progress line by line instead of the TUI")
    opt.add_argument("--timeout", type=positive_float, default=None, help="seconds for each candidate's evaluation")
    opt.add_argument("--size", choices=["auto", "full", "small"], default=None)
    opt.add_argument("--kernelbench", type=Path, default=None, help="a KernelBench checkout, for ids like L1#23")
    opt.add_argument("--critic", default="rule", help=CRITIC_HELP)
    opt.add_argument("--critic-base-url", default=None, help="the LLM critic's server (default: its provider's)")
    opt.add_argument("--capture-traces", action="store_true", default=None, help=_CAPTURE_HELP)
    res: argparse.ArgumentParser = subparsers.add_parser("resume", help="continue a recorded session")
    res.add_argument("session", help="a session directory, or a session id under the sessions home")
    res.add_argument("--model", default=None, help="the generator to continue with (default: the session's)")
    res.add_argument("--base-url", default=None)
    res.add_argument("--headless", action="store_true", help="print progress line by line instead of the TUI")
    res.add_argument("--timeout", type=positive_float, default=None)
    res.add_argument("--kernelbench", type=Path, default=None)
    res.add_argument("--capture-traces", action="store_true", default=None, help=_CAPTURE_HELP)


# option -> setting: an option left out takes the setting's value (defaults < config files < environment)
_SETTINGS_OF = {
    "model": "loop.model",
    "backend": "loop.backend",
    "iterations": "loop.iterations",
    "timeout": "evaluate.timeout_s",
    "size": "evaluate.size",
    "capture_traces": "traces.enabled",
}


def apply_settings(args: argparse.Namespace, options: tuple[str, ...]) -> Settings:
    """Fill the ``options`` left out from the settings (flags win), and set ``args.key_env``: the
    environment plus the configured API keys, for the LLM builder only (never the process's environment)."""
    given = {_SETTINGS_OF[o]: (f"--{o}", getattr(args, o)) for o in options if getattr(args, o) is not None}
    settings = with_flags(load_settings(), given)
    for option in options:
        setattr(args, option, default_model(settings) if option == "model" else settings.value(_SETTINGS_OF[option]))
    args.key_env = key_environment(settings)
    return settings


def run_optimize(args: argparse.Namespace) -> int:
    settings = apply_settings(args, ("model", "backend", "iterations", "timeout", "size", "capture_traces"))
    problem = load_problem(args.problem, kernelbench=args.kernelbench)
    plan = session_plan(settings, args.critic, args.base_url, args.critic_base_url)
    critic = build_critic(plan, args.key_env)
    config = plan.config
    if not args.headless:
        require_terminal()
    existed = args.session_dir is not None and args.session_dir.exists()
    if args.session_dir is not None:
        store = DirectoryStore.create_at(args.session_dir, problem.name, config)
    else:
        store = DirectoryStore.create(settings.sessions.home, problem.name, config)
    try:
        generator = build_generator(plan, problem, store.path, args.key_env)
    except ConfigError:
        _discard_empty_session(store.path, keep_folder=existed)  # nothing was recorded in it yet
        raise
    evaluator = build_evaluator(plan)
    with capturing(args.capture_traces, store.path, settings.traces.dir):
        if not args.headless:
            from kernel_code.tui.launch import open_session

            return open_session(store.path, lambda c: optimize(problem, generator, evaluator, store, config, critic, c),
                                trace=args.capture_traces)  # fmt: skip
        console = Console()
        console.print(f"session {store.session_id} in {store.path}", markup=False, highlight=False)
        for event in optimize(problem, generator, evaluator, store, config, critic):
            print_event(event, console)
        return 0


def _discard_empty_session(path: Path, keep_folder: bool) -> None:
    """Remove what creating a session wrote (its config and empty files), when it never started."""
    for child in sorted(path.rglob("*"), reverse=True):  # files before their folders
        if child.is_dir():
            child.rmdir()
        else:
            child.unlink()
    if not keep_folder:
        path.rmdir()


def run_resume(args: argparse.Namespace) -> int:
    settings = apply_settings(args, ("timeout", "capture_traces"))  # the rest: the session's own, or the flags
    path = Path(args.session)
    if not path.is_dir():
        path = settings.sessions.home / args.session
    store = DirectoryStore.open(path)
    started = next((e for e in store.read_events().events if isinstance(e, SessionStarted)), None)
    if started is None:
        raise ConfigError(f"{path} has no recorded start: it cannot be resumed, start a new session")
    problem = load_problem(started.problem_path if Path(started.problem_path).is_file() else started.problem_name,
                           kernelbench=args.kernelbench)  # fmt: skip
    model = args.model or store.config.model
    base_url = args.base_url or provider_base_url(settings, model)
    plan = SessionPlan(dataclasses.replace(store.config, model=model), args.timeout, base_url,
                       price_file=settings.prices.file)  # fmt: skip
    generator = build_generator(plan, problem, store.path, args.key_env)
    evaluator = build_evaluator(plan)
    with capturing(args.capture_traces, store.path, settings.traces.dir):
        if not args.headless:
            from kernel_code.tui.launch import open_session

            return open_session(store.path, lambda c: resume_session(store, problem, generator, evaluator, controls=c),
                                history=store.read_events().events, trace=args.capture_traces)  # fmt: skip
        console = Console()
        for event in resume_session(store, problem, generator, evaluator):
            print_event(event, console)
        return 0


def print_event(event: Event, console: Console) -> None:
    """One progress line for ``event`` (headless mode); events with nothing to say print nothing."""
    line = _line(event)
    if line:
        console.print(line, markup=False, highlight=False)


def _line(event: Event) -> str | None:
    if isinstance(event, SessionStarted):
        return f"started: {event.problem_name} · {event.backend} · {event.model} · {event.device}"
    if isinstance(event, IterationStarted):
        intent = f" {event.intent}" if event.intent else ""
        hints = "".join(f" · hint: {h}" for h in event.hints)
        return f"#{event.iteration} started ({event.backend or '?'}){intent}{hints}"
    if isinstance(event, KernelProposed):
        return f"#{event.iteration} proposed: {event.intent} -> {event.kernel_file}"
    if isinstance(event, EvaluationFinished):
        result = event.result_json
        speedup = result.get("speedup")
        valid = "" if result.get("timing_valid") else " (not a GPU timing)"
        shown = f" · {_times(speedup)}{valid}" if isinstance(speedup, float) else ""
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
        best = "no correct kernel" if event.best_speedup is None else f"best {_times(event.best_speedup)}"
        return f"finished: {event.reason} · {best} (iteration {event.best_iteration})"
    return None


def _times(speedup: float) -> str:
    """2.35x; a CPU interpreter's tiny ratio keeps its digits (0.000213x, not 0.00x)."""
    return f"{speedup:.2f}x" if speedup >= 0.01 else f"{speedup:.3g}x"
