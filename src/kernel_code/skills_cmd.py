"""``kernel-code skills``: browse the skill library, rank it for a situation, or read one technique in full.

Kept out of ``cli.py`` so the command's rendering can be tested without a subprocess; ``cli.py`` only
registers the parser and dispatches to :func:`run`.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from openkernel.skills import SIGNALS, Skill, SkillMatch, load_skills, match_skills, parse_match_spec

__all__ = ["add_parser", "run"]

_SPEC_HELP = (
    "rank skills for a situation: bottleneck, op classes, signals, hardware and backend as words separated by "
    "commas, e.g. memory_bound,softmax,long_rows,sm_90,triton"
)


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Register ``skills`` on the ``kernel-code`` subcommand parser."""
    parser = subparsers.add_parser("skills", help="list, rank or show the optimisation techniques the generators use")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--match", metavar="SPEC", default=None, help=_SPEC_HELP)
    mode.add_argument("--show", metavar="ID", default=None, help="one skill in full, with its examples")
    mode.add_argument("--signals", action="store_true", help="the profile signals a spec can name, with meanings")
    parser.add_argument("--limit", type=_positive_int, default=8, help="how many matches --match shows (default 8)")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout instead of tables")


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    """Carry out ``kernel-code skills``; returns the exit code (2 for a bad spec or an unknown id)."""
    console = console or Console()
    skills = load_skills()
    if args.match is not None:
        try:
            query = parse_match_spec(args.match)
        except ValueError as err:
            return _error(str(err))
        matches = match_skills(query, skills, limit=args.limit)
        if args.json:
            _print_json([{**_skill_summary(m.skill), "score": m.score, "because": list(m.because)} for m in matches])
        else:
            _print_matches(console, args.match, matches)
    elif args.show is not None:
        by_id = {s.id: s for s in skills}
        skill = by_id.get(args.show)
        if skill is None:
            close = difflib.get_close_matches(args.show, list(by_id), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            return _error(f"no skill {args.show!r}: {hint}run `kernel-code skills` to list them")
        if args.json:
            _print_json(dataclasses.asdict(skill))
        else:
            _print_skill(console, skill)
    elif args.signals:
        if args.json:
            _print_json(SIGNALS)
        else:
            _print_signals(console)
    elif args.json:
        _print_json([_skill_summary(s) for s in skills])
    else:
        _print_list(console, skills)
    return 0


def _error(message: str) -> int:
    print(f"kernel-code: error: {message}", file=sys.stderr)
    return 2


def _print_json(value: object) -> None:
    sys.stdout.write(json.dumps(value) + "\n")


def _skill_summary(skill: Skill) -> dict[str, Any]:
    return {
        "id": skill.id,
        "title": skill.title,
        "bottlenecks": list(skill.bottlenecks),
        "op_classes": list(skill.op_classes),
        "hardware": list(skill.hardware),
    }


def _print_list(console: Console, skills: tuple[Skill, ...]) -> None:
    table = Table(title=f"{len(skills)} skills", header_style="bold", box=None, pad_edge=False)
    table.add_column("id", no_wrap=True)
    for column in ("title", "bottlenecks", "op classes", "hardware"):
        table.add_column(column, overflow="fold")
    for s in skills:
        table.add_row(s.id, escape(s.title), ", ".join(s.bottlenecks), ", ".join(s.op_classes), ", ".join(s.hardware))
    console.print(table)
    console.print("[dim]kernel-code skills --show ID for one in full; --match SPEC to rank them[/]")


def _print_matches(console: Console, spec: str, matches: list[SkillMatch]) -> None:
    if not matches:
        console.print(f"no skill matches {escape(spec)!r}")
        return
    table = Table(title=f"skills for {escape(spec)}", header_style="bold", box=None, pad_edge=False)
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("id", no_wrap=True)
    table.add_column("title", overflow="fold")
    table.add_column("because", overflow="fold")
    for rank, m in enumerate(matches, start=1):
        table.add_row(str(rank), f"{m.score:g}", m.skill.id, escape(m.skill.title), ", ".join(m.because))
    console.print(table)


def _print_skill(console: Console, skill: Skill) -> None:
    console.print(f"[bold]{escape(skill.title)}[/]  [dim]{skill.id}[/]")
    console.print(escape(skill.summary))
    facts = Table(show_header=False, box=None, pad_edge=False)
    facts.add_column(style="bold")
    facts.add_column(overflow="fold")
    facts.add_row("bottlenecks", ", ".join(skill.bottlenecks))
    facts.add_row("op classes", ", ".join(skill.op_classes))
    facts.add_row("signals", ", ".join(skill.signals) or "—")
    facts.add_row("hardware", ", ".join(skill.hardware))
    facts.add_row("typical effect", escape(skill.typical_effect))
    console.print(facts)
    console.print(f"\n[bold]What[/]\n{escape(skill.what)}\n\n[bold]Why[/]\n{escape(skill.why)}")
    for name, code, lexer in (("Triton", skill.triton_example, "python"), ("CUDA", skill.cuda_example, "cuda")):
        if code is not None:
            console.print(f"\n[bold]{name} example[/]")
            console.print(Syntax(code, lexer, line_numbers=False, word_wrap=True))


def _print_signals(console: Console) -> None:
    table = Table(title="profile signals", header_style="bold", box=None, pad_edge=False)
    table.add_column("signal")
    table.add_column("meaning", overflow="fold")
    for name, meaning in SIGNALS.items():
        table.add_row(name, meaning)
    console.print(table)
