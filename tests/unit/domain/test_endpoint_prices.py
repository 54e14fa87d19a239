"""Nothing is ever free by accident: a model's endpoints and the prices they bill, checked at start-up."""

from dataclasses import dataclass
from decimal import Decimal

import pytest

from domain import endpoints
from domain.endpoint_prices import BILLING, Billing, check_endpoint_prices
from domain.endpoints import ENDPOINT_PATHS, parse_endpoints
from domain.price_list import parse_price_list
from domain.pricing import Price
from domain.settings import ConfigError, parse_settings
from tests.unit.domain.test_settings import GOOD

CHAT_PRICING = "pricing = {input = 2.5, output = 10.0, cache_create = 3.125, cache_hit = 1.25}"
EMBEDDINGS_ONLY = GOOD.replace(CHAT_PRICING, 'pricing = {input = 0.02}\nendpoints = ["embeddings"]')


def test_a_model_without_endpoints_serves_the_generation_endpoints_as_before():
    model = parse_settings(GOOD, "t.toml").models[0]
    assert model.endpoints == ["chat.completions", "responses", "messages", "generate_content"]
    assert model.serves(endpoints.CHAT)
    assert not model.serves(endpoints.EMBEDDINGS)


def test_an_embeddings_model_needs_only_an_input_price():
    model = parse_settings(EMBEDDINGS_ONLY, "t.toml").models[0]
    assert model.endpoints == ["embeddings"]
    price = model.price
    assert price.input == Decimal("0.02")
    assert price.unpriced == frozenset({"output", "cache_create", "cache_hit"})
    assert price.as_record() == {"input": "0.02"}  # the rates it has no price for are left out, not 0
    assert Price.from_record(price.as_record()) == price


@pytest.mark.parametrize("missing", ["output", "cache_create", "cache_hit", "input"])
def test_a_generation_model_missing_a_token_price_is_refused_naming_the_key(missing):
    rates = {"input": "2.5", "output": "10.0", "cache_create": "3.125", "cache_hit": "1.25"}
    del rates[missing]
    pricing = "pricing = {" + ", ".join(f"{k} = {v}" for k, v in rates.items()) + "}"
    with pytest.raises(ConfigError) as error:
        parse_settings(GOOD.replace(CHAT_PRICING, pricing), "conf/t.toml")
    assert error.value.key == f"models[0].pricing.{missing}"
    assert str(error.value).startswith(f"conf/t.toml: models[0].pricing.{missing}: required: the model serves")


def test_an_embeddings_model_without_an_input_price_is_refused():
    text = GOOD.replace(CHAT_PRICING, 'pricing = {output = 1.0}\nendpoints = ["embeddings"]')
    with pytest.raises(ConfigError) as error:
        parse_settings(text, "conf/t.toml")
    assert error.value.key == "models[0].pricing.input"
    assert "serves embeddings" in error.value.problem


def test_a_model_serving_chat_and_embeddings_needs_every_chat_price():
    text = GOOD.replace(CHAT_PRICING, 'pricing = {input = 1.0}\nendpoints = ["embeddings", "chat.completions"]')
    with pytest.raises(ConfigError, match=r"models\[0\]\.pricing\.output: required: the model serves chat"):
        parse_settings(text, "t.toml")


@pytest.mark.parametrize(
    ("served", "problem"),
    [
        ('["teleport"]', "unknown or unserved endpoint 'teleport'"),
        ("[]", "at least one endpoint"),
        ('["embeddings", "embeddings"]', "named twice"),
    ],
)
def test_endpoints_are_names_the_gateway_bills(served, problem):
    text = GOOD.replace(CHAT_PRICING, f"pricing = {{input = 1.0}}\nendpoints = {served}")
    with pytest.raises(ConfigError) as error:
        parse_settings(text, "t.toml")
    assert (error.value.key, problem in error.value.problem) == ("models[0].endpoints", True)


def test_embeddings_on_an_anthropic_upstream_is_refused():
    text = EMBEDDINGS_ONLY.replace(
        'kind = "openai", base_url = "http://127.0.0.1:9100/v1"',
        'kind = "anthropic", base_url = "http://127.0.0.1:9100"',
    )
    with pytest.raises(ConfigError) as error:
        parse_settings(text, "t.toml")
    assert error.value.key == "models[0].upstream.kind"
    assert "does not serve embeddings" in error.value.problem


def test_a_price_list_file_is_checked_against_the_endpoints_too():
    with pytest.raises(ConfigError, match=r"models\[0\]\.pricing\.input"):
        parse_price_list('[[models]]\nid = "e"\nendpoints = ["embeddings"]\npricing = {}\n', "p.toml")
    prices = parse_price_list('[[models]]\nid = "e"\nendpoints = ["embeddings"]\npricing = {input = 0.1}\n', "p.toml")
    assert prices["e"].as_record() == {"input": "0.1"}


def test_every_registered_endpoint_has_a_path_and_key_restrictions_take_every_endpoint():
    assert set(BILLING) <= set(ENDPOINT_PATHS)
    assert parse_endpoints("/v1/embeddings, images.generations,/v1/batches") == [
        "embeddings",
        "images.generations",
        "batches",
    ]
    for name, path in ENDPOINT_PATHS.items():
        assert parse_endpoints(path) == [name]


def test_a_quantity_priced_by_any_of_several_fields_is_met_by_one():
    @dataclass
    class Pricing:
        per_second: Decimal | None = Decimal(1)
        input: Decimal | None = None

    registry = {endpoints.AUDIO_TRANSCRIPTIONS: Billing((("per_second", "input"),))}
    failures: list[tuple[str, str]] = []

    def fail(key: str, problem: str) -> None:
        failures.append((key, problem))

    check_endpoint_prices([endpoints.AUDIO_TRANSCRIPTIONS], Pricing(), "models[0]", fail, registry)
    check_endpoint_prices([endpoints.AUDIO_TRANSCRIPTIONS], Pricing(None, Decimal(2)), "models[0]", fail, registry)
    assert failures == []
    check_endpoint_prices([endpoints.AUDIO_TRANSCRIPTIONS], Pricing(None), "models[0]", fail, registry)
    assert [key for key, _ in failures] == ["models[0].pricing.per_second"]
    assert "models[0].pricing.per_second or models[0].pricing.input" in failures[0][1]


TRANSCRIBES = 'endpoints = ["audio.transcriptions", "audio.translations"]'


@pytest.mark.parametrize(
    ("pricing", "key"),
    [
        ("{audio_input = 6, input = 2.5}", "models[0].pricing.output"),
        ("{audio_input = 6, output = 10}", "models[0].pricing.input"),
        ("{input = 2.5, output = 10}", "models[0].pricing.audio_second"),
    ],
)
def test_a_token_priced_transcription_model_lacking_a_rate_is_refused(pricing: str, key: str):
    """Priced per audio token, a transcription bills the prompt's text tokens and the transcript's
    too: a model without either rate is refused at start-up, naming the key; and one with neither a
    per-second nor a per-token audio price is refused naming both."""
    text = GOOD.replace(CHAT_PRICING, f"pricing = {pricing}\n{TRANSCRIBES}")
    with pytest.raises(ConfigError) as error:
        parse_settings(text, "conf/t.toml")
    assert error.value.key == key
    assert "serves audio.transcriptions" in error.value.problem
    if key.endswith("audio_second"):
        assert "models[0].pricing.audio_second or models[0].pricing.audio_input" in error.value.problem


def test_a_transcription_model_may_be_priced_per_second_per_token_or_both():
    for pricing in (
        "{audio_second = 0.0001}",
        "{audio_input = 6, input = 2.5, output = 10}",
        "{audio_second = 0.0001, audio_input = 6, input = 2.5, output = 10}",
    ):
        model = parse_settings(GOOD.replace(CHAT_PRICING, f"pricing = {pricing}\n{TRANSCRIBES}"), "t.toml").models[0]
        assert model.audio_tokens_per_second == 50
        assert Price.from_record(model.price.as_record()) == model.price
    assert model.price.as_record() == {"input": "2.5", "output": "10", "audio_second": "0.0001", "audio_input": "6"}


def test_audio_tokens_per_second_must_be_a_positive_count():
    text = GOOD.replace(
        CHAT_PRICING, f"pricing = {{audio_second = 0.0001}}\n{TRANSCRIBES}\naudio_tokens_per_second = 0"
    )
    with pytest.raises(ConfigError) as error:
        parse_settings(text, "t.toml")
    assert error.value.key == "models[0].audio_tokens_per_second"
