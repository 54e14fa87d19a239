"""Transcriptions priced per second, per token or both: the hold is a true upper bound, the charge
what the answer reports, worked out by hand (100 credits per USD: a USD per million tokens is 100
micro-credits a token, a USD per second 100,000,000 micro-credits a second)."""

from decimal import Decimal

import pytest

from domain.audio_pricing import Heard, reported_seconds, token_bound, usage_of, worst_case_in_micros
from domain.pricing import Price, price_usage
from domain.usage import TokenUsage

CREDITS = Decimal(100)
#: gpt-4o-transcribe: 6 USD per million audio tokens, 2.5 text in, 10 out.
TOKENS = Price(Decimal("2.5"), Decimal(10), Decimal(0), Decimal(0), audio_input=Decimal(6))
#: whisper-1: 0.006 USD a minute.
SECONDS = Price(Decimal(0), Decimal(0), Decimal(0), Decimal(0), audio_second=Decimal("0.0001"))
BOTH = Price(
    Decimal("2.5"), Decimal(10), Decimal(0), Decimal(0), audio_second=Decimal("0.0001"), audio_input=Decimal(6)
)
HEARD = Heard(seconds=4, prompt_bytes=16, output_tokens=2000, tokens_per_second=50)
REPORTED = {
    "type": "tokens",
    "input_tokens": 42,
    "input_token_details": {"audio_tokens": 40, "text_tokens": 2},
    "output_tokens": 5,
    "total_tokens": 47,
}


def test_a_token_priced_answer_is_charged_its_tokens_at_their_three_rates():
    usage = usage_of(TOKENS, HEARD, REPORTED)
    assert usage == TokenUsage(input_tokens=2, output_tokens=5, audio_input_tokens=40)
    cost = price_usage(usage, TOKENS, CREDITS)
    # 40 × 600 + 2 × 250 + 5 × 1,000
    assert cost.micros == 24_000 + 500 + 5_000
    assert set(cost.parts) == {"audio_input", "input", "output"}


def test_the_hold_is_the_seconds_tokens_the_prompt_and_the_output_limit():
    # 4 s × 50 tokens × 600 + 16 bytes × 250 + 2,000 × 1,000
    assert worst_case_in_micros(TOKENS, HEARD, CREDITS) == 120_000 + 4_000 + 2_000_000
    assert (
        worst_case_in_micros(TOKENS, HEARD, CREDITS)
        >= price_usage(usage_of(TOKENS, HEARD, REPORTED), TOKENS, CREDITS).micros
    )
    assert worst_case_in_micros(SECONDS, HEARD, CREDITS) == 40_000
    assert worst_case_in_micros(BOTH, HEARD, CREDITS) == 2_124_000  # the dearer of the two
    assert worst_case_in_micros(TOKENS, HEARD, CREDITS, Decimal(-10)) == 2_124_000 * 9 // 10


def test_undetailed_input_tokens_are_billed_as_audio():
    undetailed = {"type": "tokens", "input_tokens": 30, "output_tokens": 3, "total_tokens": 33}
    assert usage_of(TOKENS, HEARD, undetailed) == TokenUsage(output_tokens=3, audio_input_tokens=30)
    text_only = {**undetailed, "input_token_details": {"text_tokens": 4}}
    assert usage_of(TOKENS, HEARD, text_only) == TokenUsage(input_tokens=4, output_tokens=3, audio_input_tokens=26)


@pytest.mark.parametrize(
    ("price", "reported", "expected"),
    [
        (SECONDS, REPORTED, TokenUsage(audio_seconds=4)),  # per second only: the file's seconds, tokens or not
        (SECONDS, {"type": "duration", "seconds": 3.2}, TokenUsage(audio_seconds=4)),
        (BOTH, None, TokenUsage(audio_seconds=4)),  # both: per second when no tokens are reported
        (BOTH, {"type": "duration", "seconds": 2}, TokenUsage(audio_seconds=2)),
        (TOKENS, None, token_bound(HEARD)),  # tokens alone, none reported: the hold's bound
        (TOKENS, {"type": "tokens", "input_tokens": "x", "output_tokens": 1}, token_bound(HEARD)),
    ],
)
def test_what_an_answer_without_tokens_is_charged(price: Price, reported: object, expected: TokenUsage):
    assert usage_of(price, HEARD, reported) == expected


def test_an_audio_token_without_a_rate_is_never_free():
    with pytest.raises(ValueError, match="audio input token"):
        price_usage(TokenUsage(audio_input_tokens=1), SECONDS, CREDITS)


def test_reported_seconds_are_whole_rounded_up():
    assert reported_seconds({"type": "duration", "seconds": 3.001}) == 4
    assert reported_seconds({"type": "duration", "seconds": True}) is None
    assert reported_seconds({"type": "tokens"}) is None
