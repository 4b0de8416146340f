"""``kernel-code traces``: recorded sessions as Parquet traces, their statistics, and SFT pairs.

    kernel-code traces export [SESSION ...] [-o FILE_OR_DIR]   sessions -> a dataset directory or one .parquet
    kernel-code traces stats PATH [--json]                     sessions, iterations, keep rate, speedups
    kernel-code traces sft PATH [--top 0.1] -o pairs.jsonl     the best iterations as instruction -> kernel

Works on any recorded session, also ones recorded before trace capture was turned on
(``kernel-code optimize --capture-traces`` exports each session as it ends).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from openkernel.errors import ConfigError, OpenKernelError
from openkernel.settings import load_settings
from openkernel.traces.build import TraceRow, build_trace
from openkernel.traces.sft import check_top, select_pairs, write_pairs
from openkernel.traces.stats import Distribution, trace_stats
from openkernel.traces.write import export_session, read_traces, write_file, write_session

__all__ = ["add_parser", "capturing", "run"]


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "traces", help="export sessions as Parquet traces, summarise them, make training pairs"
    )
    sub = parser.add_subparsers(dest="traces_command", required=True)
    export = sub.add_parser("export", help="write recorded sessions as Parquet traces (secrets scrubbed)")
    export.add_argument(
        "sessions", nargs="*", help="session directories or ids (default: every session under the sessions home)"
    )
    export.add_argument(
        "-o", "--output", type=Path, default=None,
        help="a dataset directory (one file per session), or FILE.parquet (default: the traces dir of the settings)",
    )  # fmt: skip
    export.add_argument("--home", type=Path, default=None, help="where sessions live (default: the settings')")
    stats = sub.add_parser("stats", help="sessions, iterations, keep rate and speedups by hardware/backend/model")
    stats.add_argument("path", type=Path, help="a traces file or dataset directory")
    stats.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    sft = sub.add_parser("sft", help="the best iterations by speedup as instruction -> kernel pairs (JSONL)")
    sft.add_argument("path", type=Path, help="a traces file or dataset directory")
    sft.add_argument("--top", type=float, default=0.1, help="the fraction of correct iterations to keep (0, 1]")
    sft.add_argument("-o", "--output", type=Path, required=True, help="the JSONL file to write")
    return parser


def run(args: argparse.Namespace) -> int:
    if args.traces_command == "export":
        return _export(args)
    if args.traces_command == "stats":
        return _stats(args)
    return _sft(args)


@contextlib.contextmanager
def capturing(enabled: bool, session_dir: Path, traces_dir: Path) -> Iterator[None]:
    """Around a running session: once it ends, however it ends (finished, stopped, quit, Ctrl-C, an
    error), trace it into ``traces_dir`` when ``enabled``. A failed capture is reported, never raised:
    the session itself is safe on disk and can be exported later with `kernel-code traces export`."""
    try:
        yield
    finally:
        if enabled:
            try:
                written = export_session(session_dir, traces_dir)
            except (OpenKernelError, OSError) as err:
                print(f"kernel-code: the traces were not captured ({err}); try `kernel-code traces export`")
            else:
                print(f"traces {written.action}: {written.path}")


def _export(args: argparse.Namespace) -> int:
    settings = load_settings()
    home: Path = args.home or settings.sessions.home
    output: Path = args.output or settings.traces.dir
    rows = _rows(args.sessions, home)
    if output.suffix == ".parquet":
        write_file(rows, output)
        count = sum(len(r["iterations"]) for r in rows)
        print(f"wrote {len(rows)} session{'s' * (len(rows) != 1)} ({count} iterations) to {output}")
        return 0
    done = [write_session(row, output) for row in rows]
    for w in done:
        print(f"{w.action} {w.session_id} ({w.iterations} iterations): {w.path}")
    counts = {a: sum(w.action == a for w in done) for a in ("added", "replaced", "unchanged")}
    print(f"traces in {output}: " + ", ".join(f"{n} {a}" for a, n in counts.items()))
    return 0


def _rows(names: list[str], home: Path) -> list[TraceRow]:
    """The trace of each named session; with none named, of every session under ``home`` (skipping broken ones)."""
    if names:
        return [build_trace(_session_dir(name, home)) for name in names]
    found = sorted(p for p in home.iterdir() if p.is_dir() and not p.name.startswith(".")) if home.is_dir() else []
    if not found:
        raise ConfigError(
            f"no sessions found under {home}: record one with `kernel-code optimize`, or name session directories"
        )
    rows = []
    for path in found:
        try:
            rows.append(build_trace(path))
        except OpenKernelError as err:
            print(f"kernel-code: skipped {path.name}: {err}", file=sys.stderr)
    if not rows:
        raise ConfigError(f"none of the {len(found)} sessions under {home} could be read (see above)")
    return rows


def _session_dir(name: str, home: Path) -> Path:
    path = Path(name)
    if path.is_dir():
        return path
    if (home / name).is_dir():
        return home / name
    raise ConfigError(
        f"no session {name!r}: it is neither a directory nor a session id under {home} "
        "(list them with `kernel-code sessions`)"
    )


def _stats(args: argparse.Namespace) -> int:
    stats = trace_stats(read_traces(args.path))
    if args.json:
        sys.stdout.write(json.dumps(dataclasses.asdict(stats)) + "\n")
        return 0
    print(f"{stats.sessions} sessions · {stats.iterations} iterations · {stats.kept} kept ({_rate(stats.keep_rate)})")
    for g in stats.groups:
        print(
            f"\n{g.hardware} · {g.backend} · {g.model}\n"
            f"  {g.sessions} sessions · {g.iterations} iterations · {g.kept} kept ({_rate(g.keep_rate)}) · "
            f"{g.correct} correct\n"
            f"  speedup of correct iterations: {_spread(g.speedup)}\n"
            f"  best speedup per session:      {_spread(g.best_speedup)}"
        )
    return 0


def _rate(rate: float | None) -> str:
    return "—" if rate is None else f"{100 * rate:.1f}%"


def _spread(d: Distribution | None) -> str:
    if d is None:
        return "—"
    return (
        f"min {d.min:.2f}x · p25 {d.p25:.2f}x · median {d.median:.2f}x · p75 {d.p75:.2f}x · max {d.max:.2f}x "
        f"(n={d.count})"
    )


def _sft(args: argparse.Namespace) -> int:
    top = check_top(args.top)  # before reading anything: a bad flag is the first thing to hear about
    pairs = select_pairs(read_traces(args.path), top)
    write_pairs(pairs, args.output)
    print(f"wrote {len(pairs)} pair{'s' * (len(pairs) != 1)} (the best {100 * top:g}% by speedup) to {args.output}")
    return 0
