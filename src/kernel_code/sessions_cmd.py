"""``kernel-code sessions``: the recorded optimisation sessions, newest last."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from openkernel.store import SessionSummary, default_home, list_sessions

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser("sessions", help="list recorded optimisation sessions")
    parser.add_argument("--home", type=Path, default=None, help="where sessions live (default: the user's data dir)")
    parser.add_argument("--json", action="store_true", help="print one JSON list on stdout")
    return parser


def run(args: argparse.Namespace) -> int:
    home = args.home or default_home()
    sessions = list_sessions(home)
    if args.json:
        sys.stdout.write(json.dumps([_json(s) for s in sessions]) + "\n")
        return 0
    console = Console()
    if not sessions:
        console.print(f"no sessions under {home}", markup=False, highlight=False)
        return 0
    table = Table(title=f"sessions in {home}")
    for column in ("session", "problem", "backend", "model", "started", "iterations", "best", "state"):
        table.add_column(column, justify="right" if column in ("iterations", "best") else "left")
    for s in sessions:
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.started_at_unix_s)) if s.started_at_unix_s else "—"
        best = "—" if s.best_speedup is None else f"{s.best_speedup:.2f}x"
        state = f"broken: {s.error}" if s.error else ("finished" if s.finished else "open")
        table.add_row(
            s.session_id, s.problem_name or "—", s.backend or "—", s.model or "—", started,
            str(s.iterations_completed), best, state,
        )  # fmt: skip
    console.print(table)
    return 0


def _json(s: SessionSummary) -> dict[str, Any]:
    return {
        "session_id": s.session_id,
        "path": str(s.path),
        "problem": s.problem_name,
        "backend": s.backend,
        "model": s.model,
        "started_at_unix_s": s.started_at_unix_s,
        "iterations_completed": s.iterations_completed,
        "best_speedup": s.best_speedup,
        "finished": s.finished,
        "error": s.error,
    }
