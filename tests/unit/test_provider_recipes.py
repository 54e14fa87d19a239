"""The configuration blocks the provider pages and the price page give are files the gateway takes
as written: each parses and passes every check (the end-to-end suites run the Gemini and Vertex
recipes against the fakes; these are the ones they cannot reach, Bedrock's and Azure's included)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from domain.settings import parse_settings

DOCS = Path(__file__).resolve().parents[2] / "docs"
TOP = 'database_url = "sqlite:///tollgate.db"\ncredits_per_usd = 100\n'


def toml_blocks(page: str) -> list[str]:
    return re.findall(r"```toml\n(.*?)```", (DOCS / page).read_text(), re.DOTALL)


@pytest.mark.parametrize("page", ["bedrock.md", "azure-openai.md", "gemini.md", "vertex.md"])
def test_every_model_block_of_the_page_is_a_configuration_the_gateway_takes(page: str):
    blocks = [b for b in toml_blocks(page) if "[[models]]" in b]
    assert blocks, f"docs/{page} gives no [[models]] block"
    for block in blocks:
        settings = parse_settings(TOP + block, f"docs/{page}")
        assert settings.models


def test_the_deployment_price_example_prices_its_eu_region_under_its_own_key():
    (block,) = [b for b in toml_blocks("prices.md") if "[[models.upstreams]]" in b]
    (model,) = parse_settings(TOP + block, "docs/prices.md").models
    keys = dict(model.priced_keys())
    assert set(keys) == {"claude-sonnet", "claude-sonnet/eu"}
    assert model.price_keys() == list(keys)  # what the hold reads, in the same order
    assert keys["claude-sonnet/eu"].input == keys["claude-sonnet"].input * 11 / 10
