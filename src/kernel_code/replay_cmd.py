"""``kernel-code replay SESSION``: re-evaluate a recorded session's kernels here, and compare.

A new session runs the replay generator (same problem, backend and size as the recording), then a
table lines up each kernel's recorded status, time and speedup with the new ones. The rows come
from :func:`openkernel.generate.replay.compare` (data, for the TUI as well); :func:`comparison_table`
is only their rich rendering.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kernel_code.arguments import positive_float
from kernel_code.optimize_cmd import print_event
from kernel_code.tui import require_terminal
from openkernel import EvalConfig, ProcessEvaluator, load_problem, optimize
from openkernel.events import Event, SessionConfig, SessionStarted
from openkernel.generate.replay import ReplayGenerator, ReplayRow, compare, device_warning, find_session
from openkernel.settings import load_settings
from openkernel.store import DirectoryStore

__all__ = ["add_parser", "comparison_table", "run"]

_COLUMNS = ("iteration", "intent", "recorded", "rec. ms", "rec. speedup", "now", "now ms", "now speedup", "time change")


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "replay", help="re-evaluate a recorded session's kernels on this machine and compare"
    )
    parser.add_argument("session", help="a session directory, or a session id under the sessions home")
    parser.add_argument("--headless", action="store_true", help="print progress line by line instead of the TUI")
    parser.add_argument("--session-dir", type=Path, default=None, help="put the new session exactly here")
    parser.add_argument("--timeout", type=positive_float, default=None, help="seconds for each candidate's evaluation")
    parser.add_argument("--kernelbench", type=Path, default=None, help="a KernelBench checkout, for ids like L1#23")
    return parser


def run(args: argparse.Namespace) -> int:
    settings = load_settings()
    home = settings.sessions.home
    generator = ReplayGenerator(find_session(args.session, home))
    rec = generator.recording
    problem_ref = rec.problem_path if Path(rec.problem_path).is_file() else rec.problem_name
    problem = load_problem(problem_ref, kernelbench=args.kernelbench)
    config = SessionConfig(
        backend=rec.backend,
        model=f"replay:{rec.path.resolve()}",
        size=rec.size,
        max_iterations=None,  # the replay ends itself once every recorded kernel is re-evaluated
        wall_time_budget_s=None,
        token_budget=None,
        cost_budget_usd=None,
    )
    if not args.headless:
        require_terminal()
    if args.session_dir is not None:
        store = DirectoryStore.create_at(args.session_dir, problem.name, config)
    else:
        store = DirectoryStore.create(home, problem.name, config)
    timeout_s = args.timeout or settings.evaluate.timeout_s
    evaluator = ProcessEvaluator(EvalConfig(backend=rec.backend, size=rec.size, timeout_s=timeout_s))
    console = Console()
    console.print(f"replaying session {rec.session_id}: {rec.summary()}", markup=False, highlight=False)
    console.print(f"session {store.session_id} in {store.path}", markup=False, highlight=False)
    events: list[Event] = []
    if args.headless:
        for event in optimize(problem, generator, evaluator, store, config):
            events.append(event)
            print_event(event, console)
    else:
        from kernel_code.tui.launch import open_session

        open_session(store.path, lambda controls: optimize(problem, generator, evaluator, store, config,
                                                           controls=controls))  # fmt: skip
        events = list(store.read_events().events)  # the table below, once the TUI is closed
    started = next(e for e in events if isinstance(e, SessionStarted))
    warning = device_warning(rec.device, started.device)
    if warning is not None:
        console.print(warning, markup=False, highlight=False)
    console.print(comparison_table(compare(rec, events)))
    return 0


def comparison_table(rows: Sequence[ReplayRow]) -> Table:
    """The rows as a rich table: recorded figures, new figures, and the change in time."""
    table = Table(title="replay: recorded vs now")
    for name in _COLUMNS:
        table.add_column(name, justify="left" if name in ("intent", "recorded", "now") else "right")
    for r in rows:
        table.add_row(
            str(r.iteration),
            r.intent or "—",
            r.recorded_status or "—",
            _ms(r.recorded_runtime_ms),
            _speedup(r.recorded_speedup),
            r.new_status or "—",
            _ms(r.new_runtime_ms),
            _speedup(r.new_speedup),
            "—" if r.runtime_change_pct is None else f"{r.runtime_change_pct:+.1f}%",
        )
    return table


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _speedup(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}x"  # 3 digits: the interpreter's 0.000392x is not 0.00x
