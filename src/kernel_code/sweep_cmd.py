"""``kernel-code sweep``: optimise a whole problem set, one session per problem, on Ray.

Progress is printed as the sweep runs (a line per session that finishes or fails), then a table of
every problem with fast_p and the geometric mean speedup. ``--resume SWEEP`` continues a sweep that
stopped; ``--summary SWEEP`` prints a recorded sweep's table again. The exit status is 1 when a
problem's session failed (raised, or its worker died on every attempt), else 0.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kernel_code.arguments import positive_float
from kernel_code.models import CRITIC_HELP, MODEL_HELP
from kernel_code.optimize_cmd import apply_settings
from openkernel.errors import ConfigError
from openkernel.launch import session_plan
from openkernel.settings import load_settings
from openkernel.sweeps import (
    AttemptFailed,
    AttemptFinished,
    AttemptSubmitted,
    ClusterReady,
    SweepConfig,
    SweepEvent,
    SweepResumed,
    SweepStarted,
    SweepSummary,
    find_sweep,
    resume_sweep,
    summarise,
    sweep,
    sweeps_home,
)
from openkernel.sweeps.summary import measures_text, speedup_text

__all__ = ["add_parser", "print_summary", "run"]

_SESSION_OPTIONS = ("model", "backend", "iterations", "timeout", "size", "base_url", "critic", "critic_base_url")


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser("sweep", help="optimise many problems on Ray, one session each")
    p.add_argument(
        "problems",
        nargs="*",
        metavar="PROBLEM",
        help="problem files, folders, bundled names, KernelBench ids (L1#23) or levels (L1)",
    )
    p.add_argument(
        "--ray",
        default="local",
        help="a Ray cluster's address (auto, HOST:6379, ray://HOST:10001), or local (default): "
        "start a Ray on this machine for the sweep",
    )
    p.add_argument(
        "--gpus-per-session",
        type=float,
        default=1.0,
        help="GPUs each session holds (default 1); without GPUs in the cluster, a CPU slot",
    )
    p.add_argument(
        "--max-attempts", type=int, default=2, help="tries per problem when its worker or node dies (default 2)"
    )
    p.add_argument(
        "--resume",
        metavar="SWEEP",
        default=None,
        help="continue a sweep (folder or id): problems without a finished session run again",
    )
    p.add_argument("--summary", metavar="SWEEP", default=None, help="print a recorded sweep's summary and exit")
    p.add_argument("--local-cpus", type=int, default=None, help="CPU slots of a --ray local (default: all cores)")
    p.add_argument(
        "--ray-dir",
        type=Path,
        default=None,
        help="a --ray local's files: sockets, logs, auth token (default /tmp/kernel-code-ray-UID; "
        "keep it short, Ray's socket paths must stay under 107 bytes)",
    )
    p.add_argument("--kernelbench", type=Path, default=None, help="a KernelBench checkout, for L1#23 and L1")
    session = p.add_argument_group("each session (as for `kernel-code optimize`; not with --resume)")
    session.add_argument("--model", default=None, help=MODEL_HELP)
    session.add_argument("--backend", choices=["triton", "cuda"], default=None)
    session.add_argument("--iterations", type=int, default=None, help="iteration budget of each session")
    session.add_argument("--timeout", type=positive_float, default=None, help="seconds for each candidate's evaluation")
    session.add_argument("--size", choices=["auto", "full", "small"], default=None)
    session.add_argument("--base-url", default=None, help="an OpenAI-compatible server (vLLM, Ollama, OpenRouter...)")
    session.add_argument("--critic", default=None, help=CRITIC_HELP)
    session.add_argument("--critic-base-url", default=None)
    return p


def run(args: argparse.Namespace) -> int:
    console = Console()
    given = [f"--{o.replace('_', '-')}" for o in _SESSION_OPTIONS if getattr(args, o) is not None]
    chosen = [name for name, value in (("PROBLEMS", args.problems), ("--resume", args.resume),
                                       ("--summary", args.summary)) if value]  # fmt: skip
    if len(chosen) != 1:
        raise ConfigError("name the problems to sweep, or give --resume SWEEP or --summary SWEEP (one of the three)")
    if given and not args.problems:
        raise ConfigError(
            f"{', '.join(given)} set a new sweep's sessions: {chosen[0]} keeps the sweep's own, leave them out"
        )
    new = bool(args.problems)
    settings = apply_settings(args, ("model", "backend", "iterations", "timeout", "size")) if new else load_settings()
    home = settings.sessions.home
    if args.summary:
        return print_summary(summarise(find_sweep(args.summary, home)), console)
    config = SweepConfig(ray=args.ray, gpus_per_session=args.gpus_per_session, max_attempts=args.max_attempts,
                         kernelbench=args.kernelbench, home=home, local_cpus=args.local_cpus,
                         ray_dir=args.ray_dir)  # fmt: skip
    record_dir: Path | None = None
    if args.resume:
        record_dir = find_sweep(args.resume, home)
        events = resume_sweep(record_dir, config)
    else:
        plan = session_plan(settings, args.critic or "rule", args.base_url, args.critic_base_url)
        events = sweep(args.problems, plan, config)
    for event in events:
        if isinstance(event, SweepStarted):
            record_dir = sweeps_home(Path(event.home)) / event.sweep_id
        _print_event(event, console, record_dir)
    assert record_dir is not None  # a new sweep's first event is its SweepStarted
    return print_summary(summarise(record_dir), console)


def _print_event(event: SweepEvent, console: Console, record_dir: Path | None) -> None:
    """One progress line for ``event`` (``record_dir``: the sweep's folder, for the count of problems done)."""
    line: str | None = None
    if isinstance(event, SweepStarted):
        c = event.plan.config
        line = (f"sweep {event.sweep_id} in {record_dir} · {_count(len(event.problems), 'problem')} · {c.model} · "
                f"{c.backend} · {_count(c.max_iterations, 'iteration')} each")  # fmt: skip
    elif isinstance(event, SweepResumed):
        line = f"resumed sweep {event.sweep_id}: running again {', '.join(event.problems) or 'nothing'}"
    elif isinstance(event, ClusterReady):
        cl = event.cluster
        line = f"ray: {cl.address} ({cl.cpus:g} CPUs, {cl.gpus:g} GPUs) · each session holds {event.resources.label}"
        if cl.ray_dir is not None:
            line += f" · Ray's files and logs in {cl.ray_dir}"
        if event.resources.note:
            line += f"\n{event.resources.note}"
    elif isinstance(event, AttemptSubmitted):
        line = f"queued: {event.problem} (attempt {event.attempt}) -> {event.session_dir}"
    elif isinstance(event, AttemptFinished | AttemptFailed) and record_dir is not None:
        line = f"{_progress(record_dir)} {_ended(event)}"
    if line is not None:
        console.print(line, markup=False, highlight=False)


def _progress(record_dir: Path) -> str:
    rows = summarise(record_dir).rows
    return f"[{sum(1 for r in rows if r.status in ('finished', 'failed'))}/{len(rows)}]"


def _ended(event: AttemptFinished | AttemptFailed) -> str:
    if isinstance(event, AttemptFailed):
        then = " · retrying" if event.retried else ""
        return f"failed: {event.problem} (attempt {event.attempt}): {event.cause}: {event.reason}{then}"
    o = event.outcome
    found = "correct" if o.correct else "no correct kernel"
    cost = "price unknown" if o.cost_usd is None else f"${o.cost_usd:.4f}"
    iterations = _count(o.iterations, "iteration")
    return f"finished: {event.problem} · {found} · best {speedup_text(o)} · {iterations} · {o.tokens:,} tokens · {cost}"


WIDE_TABLE = 120  # columns: from here the table has its session / reason column


def _count(n: int | None, noun: str) -> str:
    return f"{'no limit of' if n is None else n} {noun}{'' if n == 1 else 's'}"


def print_summary(summary: SweepSummary, console: Console) -> int:
    """The table of every problem, then fast_p, the geomean, tokens and cost; the exit status (1: a
    problem failed or has not finished)."""
    table = Table(title=f"sweep {summary.sweep_id}" + ("" if summary.complete else " (not finished)"))
    # Narrower than this, the session names and reasons go under the table, a line each, so that the
    # problem and status columns stay whole (at 80 columns rich cut them to "softma…", "finish…").
    wide = console.width >= WIDE_TABLE
    for column in ("problem", "status", "best", "iters", "tries", "tokens", "cost"):  # iterations, attempts
        numeric = column in ("best", "iters", "tries", "tokens")
        table.add_column(column, justify="right" if numeric else "left", no_wrap=True)
    if wide:
        table.add_column("session / reason")
    notes = []
    for r in summary.rows:
        o = r.outcome
        cost = "—" if o is None else ("?" if o.cost_usd is None else f"${o.cost_usd:.4f}")
        where = Path(r.session_dir).name if r.status == "finished" and r.session_dir else r.reason
        cells = [r.problem, r.status, speedup_text(o), "—" if o is None else str(o.iterations), str(r.attempts),
                 "—" if o is None else f"{o.tokens:,}", cost]  # fmt: skip
        table.add_row(*cells, *([where] if wide else []))
        notes.append(f"{r.problem}: {where}")
    console.print(table)
    if not wide:
        for note in notes:
            console.print(note, markup=False, highlight=False)
    console.print(measures_text(summary), markup=False, highlight=False)
    if any(r.outcome is not None and r.outcome.correct and not r.outcome.timing_valid for r in summary.rows):
        console.print("* not a GPU timing (a CPU slot): correctness only", markup=False, highlight=False)
    return 0 if all(r.status == "finished" for r in summary.rows) else 1
