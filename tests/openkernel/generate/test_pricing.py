"""Prices: the built-in table, the user's table over it, and the arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

from openkernel.errors import ConfigError
from openkernel.generate.base import Usage
from openkernel.generate.pricing import Price, cost_usd, load_prices, price_for, total_usage


def test_exact_prefix_and_provider_prefixed_names() -> None:
    assert price_for("gpt-4o") == Price(2.50, 10.00)
    assert price_for("gpt-4o-mini-2024-07-18") == Price(0.15, 0.60)  # the longest matching name wins
    assert price_for("claude-sonnet-4-20250514") == Price(3.00, 15.00)
    assert price_for("anthropic/claude-opus-4-5") == Price(5.00, 25.00)
    assert price_for("gpt-4oops") is None  # a prefix only counts before "-", "@" or ":"
    assert price_for("llama3") is None


def test_the_users_table_comes_first() -> None:
    mine = {"gpt-4o": Price(1.0, 2.0), "llama3": Price(0.0, 0.0)}
    assert (price_for("gpt-4o", mine), price_for("llama3:8b", mine)) == (Price(1.0, 2.0), Price(0.0, 0.0))


def test_cost_and_session_totals() -> None:
    assert cost_usd(1000, 500, Price(2.50, 10.00)) == 0.0075
    assert total_usage([Usage(10, 5, 0.25), None, Usage(1, 2, 0.5)]) == Usage(11, 7, 0.75)
    assert total_usage([Usage(10, 5, 0.25), Usage(1, 2, None)]) == Usage(11, 7, None)


def test_load_prices(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('["my-model"]\ninput_usd_per_mtok = 0.5\noutput_usd_per_mtok = 2\n')
    assert load_prices(path) == {"my-model": Price(0.5, 2.0)}


def test_a_bad_price_file_says_how_to_fix_it(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('["my-model"]\ninput_usd_per_mtok = 0.5\n')
    with pytest.raises(ConfigError) as caught:
        load_prices(path)
    assert str(caught.value) == (
        f"the price file {path}: ['my-model'] must have exactly input_usd_per_mtok and output_usd_per_mtok; "
        'write it like:\n["my-model"]\ninput_usd_per_mtok = 0.5\noutput_usd_per_mtok = 1.5'
    )
    path.write_text('["my-model"]\ninput_usd_per_mtok = -1\noutput_usd_per_mtok = 1\n')
    with pytest.raises(ConfigError) as caught:
        load_prices(path)
    assert (
        str(caught.value)
        == f"the price file {path}: prices for 'my-model' must be numbers >= 0 (USD per million tokens)"
    )
