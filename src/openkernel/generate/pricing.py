"""What an LLM call cost: a small price table the user can extend, and the arithmetic.

The built-in table holds list prices in USD per million tokens for a few well-known models, as
published by OpenAI and Anthropic when this file was written (2025). Prices change: a user price
file (TOML, see :func:`load_prices`) overrides and extends it, and a model with no known price gets
``cost_usd=None`` rather than a guess.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from openkernel.errors import ConfigError
from openkernel.generate.base import Usage

__all__ = ["BUILTIN_PRICES", "PRICE_FILE_EXAMPLE", "Price", "cost_usd", "load_prices", "price_for", "total_usage"]

TOKENS_PER_MTOK = 1_000_000


@dataclass(frozen=True)
class Price:
    input_usd_per_mtok: float  # USD per million prompt (input) tokens
    output_usd_per_mtok: float  # USD per million completion (output) tokens


# List prices when written (2025), USD per million tokens. Names match exactly or as a prefix before a
# "-", "@" or ":" (so "claude-sonnet-4-20250514" finds "claude-sonnet-4"); the longest name wins.
BUILTIN_PRICES: Mapping[str, Price] = {
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-5": Price(1.25, 10.00),
    "gpt-5-mini": Price(0.25, 2.00),
    "o3": Price(2.00, 8.00),
    "o4-mini": Price(1.10, 4.40),
    "claude-opus-4": Price(15.00, 75.00),
    "claude-opus-4-1": Price(15.00, 75.00),
    "claude-opus-4-5": Price(5.00, 25.00),
    "claude-sonnet-4": Price(3.00, 15.00),
    "claude-sonnet-4-5": Price(3.00, 15.00),
    "claude-haiku-4-5": Price(1.00, 5.00),
    "claude-3-5-haiku": Price(0.80, 4.00),
}

PRICE_FILE_EXAMPLE = '["my-model"]\ninput_usd_per_mtok = 0.5\noutput_usd_per_mtok = 1.5'
_PRICE_KEYS = frozenset({"input_usd_per_mtok", "output_usd_per_mtok"})


def price_for(model: str, extra: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: the user's table first, then the built-in one; ``None`` if neither knows it.

    A provider prefix such as OpenRouter's ``anthropic/`` is tried with and without.
    """
    names = [model] if "/" not in model else [model, model.rsplit("/", 1)[1]]
    for table in (extra or {}, BUILTIN_PRICES):
        for name in names:
            found = _lookup(name, table)
            if found is not None:
                return found
    return None


def _lookup(model: str, table: Mapping[str, Price]) -> Price | None:
    if model in table:
        return table[model]
    prefixes = [key for key in table if any(model.startswith(key + sep) for sep in ("-", "@", ":"))]
    return table[max(prefixes, key=len)] if prefixes else None


def cost_usd(prompt_tokens: int, completion_tokens: int, price: Price) -> float:
    """USD for one call at ``price``."""
    return (prompt_tokens * price.input_usd_per_mtok + completion_tokens * price.output_usd_per_mtok) / TOKENS_PER_MTOK


def total_usage(usages: Iterable[Usage | None]) -> Usage:
    """The sum over a session's iterations. The cost is ``None`` when any call's cost is unknown."""
    known = [u for u in usages if u is not None]
    costs = [u.cost_usd for u in known]
    return Usage(
        prompt_tokens=sum(u.prompt_tokens for u in known),
        completion_tokens=sum(u.completion_tokens for u in known),
        cost_usd=None if any(c is None for c in costs) else sum(c for c in costs if c is not None),
    )


def load_prices(path: Path) -> dict[str, Price]:
    """Read a user price file: one TOML table per model name, both prices in USD per million tokens."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"cannot read the price file {path}: {err.strerror}; check the path") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(
            f"the price file {path} is not valid TOML ({err}); write it like:\n{PRICE_FILE_EXAMPLE}"
        ) from None
    prices: dict[str, Price] = {}
    for model, table in data.items():
        if not isinstance(table, dict) or set(table) != _PRICE_KEYS:
            raise ConfigError(
                f"the price file {path}: [{model!r}] must have exactly input_usd_per_mtok and output_usd_per_mtok; "
                f"write it like:\n{PRICE_FILE_EXAMPLE}"
            )
        values = [table["input_usd_per_mtok"], table["output_usd_per_mtok"]]
        if not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 for v in values
        ):
            raise ConfigError(
                f"the price file {path}: prices for {model!r} must be numbers >= 0 (USD per million tokens)"
            )
        prices[model] = Price(float(values[0]), float(values[1]))
    return prices
