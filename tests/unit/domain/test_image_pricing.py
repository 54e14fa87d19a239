"""Images priced by size × quality, or by the tokens an answer reports; held at the dearest allowed."""

from __future__ import annotations

from decimal import Decimal

import pytest

from domain.image_pricing import ImageAnswer, ImageAsk, ImageOptionError, kinds_asked, usage_of, worst_case_in_micros
from domain.pricing import Price, price_usage
from domain.settings import ConfigError, ImageDefaults, parse_settings
from domain.usage import TokenUsage

D = Decimal
DALL_E_3 = Price(
    D(0),
    D(0),
    D(0),
    D(0),
    images={"1024x1024/standard": D("0.04"), "1024x1024/hd": D("0.08"), "1024x1792/hd": D("0.12")},
)
GPT_IMAGE = Price(
    D(5),
    D(10),
    D(0),
    D("1.25"),
    image_input=D(8),
    image_output=D(32),
    images={"1024x1024/low": D("0.009"), "1024x1024/high": D("0.133")},
)
DEFAULTS = ImageDefaults(size="1024x1024", quality="standard")


def test_left_out_and_auto_resolve_to_the_defaults():
    for size, quality in ((None, None), ("auto", "auto"), ("1024x1024", None)):
        assert kinds_asked(DALL_E_3, DEFAULTS, ImageAsk(size, quality)) == ["1024x1024/standard"]


def test_without_a_default_every_value_offered_is_allowed():
    assert kinds_asked(DALL_E_3, None, ImageAsk("1024x1024", None)) == ["1024x1024/hd", "1024x1024/standard"]
    assert kinds_asked(DALL_E_3, None, ImageAsk(None, "hd")) == ["1024x1024/hd", "1024x1792/hd"]


def test_what_the_table_does_not_price_is_refused_naming_what_it_does():
    with pytest.raises(ImageOptionError) as size:
        kinds_asked(DALL_E_3, DEFAULTS, ImageAsk("512x512", None))
    assert size.value.param == "size"
    assert "one of: 1024x1024, 1024x1792" in size.value.message
    with pytest.raises(ImageOptionError) as pair:
        kinds_asked(DALL_E_3, DEFAULTS, ImageAsk("1024x1792", "standard"))
    assert pair.value.param == "quality"
    assert "offered: hd" in pair.value.message


def test_the_hold_is_n_images_at_the_dearest_allowed():
    kinds = kinds_asked(DALL_E_3, None, ImageAsk("1024x1024", None, n=3))
    # 3 × 0.08 USD × 100 credits/USD = 24 credits
    assert worst_case_in_micros(DALL_E_3, kinds, ImageAsk("1024x1024", None, n=3), D(100)) == 24_000_000
    # A 10 % markup on top
    assert worst_case_in_micros(DALL_E_3, kinds, ImageAsk("1024x1024", None, n=3), D(100), D(10)) == 26_400_000


def test_a_token_priced_hold_adds_the_prompt_and_the_input_images():
    ask = ImageAsk(None, "high", n=2, prompt_bytes=100, input_images=1)
    kinds = kinds_asked(GPT_IMAGE, None, ask)
    # 2 × 0.133 USD + 100 × 5 USD/M + 6,240 × 8 USD/M = 266,000 + 500 + 49,920 USD/M; × 100
    assert worst_case_in_micros(GPT_IMAGE, kinds, ask, D(100)) == 31_642_000


def test_an_answer_without_usage_is_charged_per_image_narrowed_by_what_it_says():
    kinds = ["1024x1024/hd", "1024x1024/standard"]
    assert usage_of(DALL_E_3, kinds, ImageAnswer(2)).images == (("1024x1024/hd", 2),)
    assert usage_of(DALL_E_3, kinds, ImageAnswer(2, quality="standard")).images == (("1024x1024/standard", 2),)
    assert usage_of(DALL_E_3, kinds, ImageAnswer(1, quality="ultra")).images == (("1024x1024/hd", 1),)
    assert usage_of(DALL_E_3, kinds, ImageAnswer(0)) == TokenUsage()


def test_token_usage_is_split_into_text_and_image_tokens():
    usage = {
        "input_tokens": 50,
        "input_tokens_details": {"text_tokens": 10, "image_tokens": 40},
        "output_tokens": 4200,
        "output_tokens_details": {"text_tokens": 40, "image_tokens": 4160},
        "total_tokens": 4250,
    }
    charged = usage_of(GPT_IMAGE, ["1024x1024/high"], ImageAnswer(1, usage=usage))
    assert charged == TokenUsage(input_tokens=10, output_tokens=40, image_input_tokens=40, image_output_tokens=4160)
    cost = price_usage(charged, GPT_IMAGE, D(100))
    # (10 × 5 + 40 × 10 + 40 × 8 + 4,160 × 32) USD/M × 100 = 13,389,000 micro-credits
    assert cost.micros == 13_389_000
    assert set(cost.parts) == {"input", "output", "image_input", "image_output"}


def test_output_without_details_is_image_output_and_a_broken_usage_is_billed_per_image():
    usage = {"input_tokens": 3, "input_tokens_details": {"text_tokens": 3, "image_tokens": 0}, "output_tokens": 1056}
    assert usage_of(GPT_IMAGE, ["1024x1024/high"], ImageAnswer(1, usage=usage)) == TokenUsage(
        input_tokens=3, image_output_tokens=1056
    )
    broken = {"input_tokens": "3", "output_tokens": 1056}
    assert usage_of(GPT_IMAGE, ["1024x1024/high"], ImageAnswer(1, usage=broken)).images == (("1024x1024/high", 1),)


def test_images_and_image_rates_round_trip_through_the_records():
    assert Price.from_record(GPT_IMAGE.as_record()) == GPT_IMAGE
    used = TokenUsage(images=(("1024x1024/hd", 2),), image_input_tokens=3, image_output_tokens=4)
    assert TokenUsage.from_record(used.as_record()) == used
    assert "images" not in TokenUsage(input_tokens=1).as_record()


def test_an_image_without_a_price_is_never_free():
    with pytest.raises(ValueError, match="no price for a 512x512/hd image"):
        price_usage(TokenUsage(images=(("512x512/hd", 1),)), DALL_E_3, D(100))


CONFIG = """
[[models]]
id = "img"
display_name = "img"
owned_by = "x"
context_window = 100
max_output_tokens = 1
upstream = {{kind = "demo"}}
endpoints = ["images.generations"]
{extra}
[models.pricing]
{pricing}
"""


@pytest.mark.parametrize(
    ("extra", "pricing", "key"),
    [
        ("", 'images = {"1024/hd" = 0.1}', "models[0].pricing.images.1024/hd"),
        ("", 'images = {"1024x1024/hd" = -1}', "models[0].pricing.images.1024x1024/hd"),
        ("", "image_tokens = {input = 1, output = 2}", "models[0].pricing.images"),
        (
            "",
            'input = 1\nimages = {"1024x1024/hd" = 0.1}\nimage_tokens = {input = 1, output = 2}',
            "models[0].pricing.output",
        ),
        ("", "input = 1", "models[0].pricing.images"),
        ('image_defaults = {quality = "ultra"}', 'images = {"1024x1024/hd" = 0.1}', "models[0].image_defaults.quality"),
    ],
)
def test_the_configuration_refuses_a_broken_image_price(extra: str, pricing: str, key: str):
    with pytest.raises(ConfigError) as refused:
        parse_settings(CONFIG.format(extra=extra, pricing=pricing), "t.toml")
    assert refused.value.key == key
