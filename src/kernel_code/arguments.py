"""Argument types shared by the ``kernel-code`` subcommands (each error reads as one line)."""

from __future__ import annotations

import argparse

__all__ = ["assignment", "positive_float"]


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
