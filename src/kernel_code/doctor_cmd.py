"""``kernel-code doctor [--json]``: what this machine has for kernel work, and the fix for what it lacks.

The checks live in ``openkernel.doctor`` (data); this module only renders them. The exit code is 0
whatever the checks find: doctor reports, it does not judge (a CPU laptop is a fine place to write
kernels, and scripts read ``--json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.text import Text

from openkernel.doctor import Check, run_checks

__all__ = ["add_parser", "run"]

_STYLE = {"ok": "green", "warn": "yellow", "missing": "red"}


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "doctor", help="check this machine (GPU, driver, torch, triton, nvcc, ncu, keys) and say how to fix gaps"
    )
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    return parser


def run(args: argparse.Namespace) -> int:
    checks = run_checks()
    if args.json:
        sys.stdout.write(json.dumps({"checks": [c.to_json() for c in checks]}) + "\n")
        return 0
    _print(checks, Console(soft_wrap=True))  # soft wrap: a fix stays one line, to copy and paste
    return 0


def _print(checks: tuple[Check, ...], console: Console) -> None:
    width = max(len(c.name) for c in checks)
    for check in checks:
        console.print(
            Text.assemble(
                (f"{check.status:<8}", _STYLE[check.status]), (f"{check.name:<{width}}  ", "bold"), check.found
            )
        )
        if check.fix is not None:
            console.print(Text.assemble(" " * (10 + width), ("fix: ", "bold"), check.fix))
    counts = {status: sum(c.status == status for c in checks) for status in _STYLE}
    console.print(", ".join(f"{n} {status}" for status, n in counts.items()))
