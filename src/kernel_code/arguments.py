"""Argument types shared by the ``kernel-code`` subcommands (each error reads as one line)."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_problem_arguments", "assignment", "positive_float"]


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def assignment(text: str) -> tuple[str, int | float]:
    """``NAME=NUMBER`` (an int where it parses as one) for ``--set``."""
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=NUMBER")
    for kind in (int, float):
        try:
            return name, kind(value)
        except ValueError:
            pass
    raise argparse.ArgumentTypeError(f"{text!r}: {value!r} is not a number")


def add_problem_arguments(parser: argparse.ArgumentParser) -> None:
    """REFERENCE CANDIDATE, and the options that pick the problem and its size (eval and profile)."""
    parser.add_argument("reference", help="problem file, bundled problem name, or KernelBench id like L1#23")
    parser.add_argument("candidate", type=Path, help="candidate file defining class ModelNew")
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    parser.add_argument(
        "--size", choices=["auto", "full", "small"], default="auto", help="problem size (auto: small without a GPU)"
    )
    parser.add_argument("--kernelbench", type=Path, default=None, help="a KernelBench checkout, for ids like L1#23")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        type=assignment,
        default=[],
        metavar="NAME=NUMBER",
        help="set a problem's module constant before get_inputs() (repeatable), e.g. --set dim=1024",
    )
