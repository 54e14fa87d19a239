"""Transcriptions and translations: what a hold reserves, and what an answer is charged.

A transcription model is priced per second of audio (``audio_second``: whisper-1, which reports
``usage: {"type": "duration", "seconds": N}`` or nothing), per token (``audio_input``, with ``input``
and ``output``: gpt-4o-transcribe and gpt-4o-mini-transcribe report ``usage: {"type": "tokens",
"input_tokens", "input_token_details": {"audio_tokens", "text_tokens"}, "output_tokens",
"total_tokens"}``), or both.

The hold must be a true upper bound before the upstream has said anything, so it is sized from what
the gateway knows then: the file's seconds (read from its header, ``app/audio_duration.py``), the
prompt's bytes (at least as many as its text tokens, whatever the tokenizer) and the model's output
limit. Per second, that is the file's seconds; per token, the file's seconds at the model's
``audio_tokens_per_second`` as audio tokens, every prompt byte as a text token and the whole output
limit as transcript tokens. A model priced both ways is held at the dearer.

The charge is what the answer reports, at the rates the model has for it: its tokens for a
token-priced model that reports tokens; else, for a model with a per-second price, the seconds the
upstream reports, or the file's own. A model priced per token alone whose answer reports no tokens
(an upstream that sends no usage) is charged its hold: nothing says it used less, and nothing may be
served free by accident.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from domain.pricing import Price, price_usage
from domain.usage import TokenUsage


@dataclass(frozen=True, slots=True)
class Heard:
    """What a transcription asks, as its endpoint knows it before the upstream is called."""

    #: The file's whole seconds, rounded up.
    seconds: int
    #: Bytes of its ``prompt``: at least as many as its text tokens.
    prompt_bytes: int = 0
    #: The most transcript tokens the model writes (its ``max_output_tokens``).
    output_tokens: int = 0
    #: The most audio tokens the model counts a second (its ``audio_tokens_per_second``).
    tokens_per_second: int = 0

    def lasting(self, seconds: int) -> Heard:
        """The same request for a file of ``seconds`` (what a refusal for credits searches over)."""
        return replace(self, seconds=seconds)


def token_priced(price: Price) -> bool:
    """Whether the model bills transcriptions by the tokens its answers report."""
    return price.audio_input is not None


def token_bound(heard: Heard) -> TokenUsage:
    """The most tokens the request can be billed: every second at the model's rate of audio tokens,
    every prompt byte a text token, the whole output limit."""
    return TokenUsage(
        input_tokens=heard.prompt_bytes,
        output_tokens=heard.output_tokens,
        audio_input_tokens=heard.seconds * heard.tokens_per_second,
    )


def worst_case_in_micros(price: Price, heard: Heard, credits_per_usd: Decimal, adjustment: Decimal = Decimal(0)) -> int:
    """What a hold reserves: the dearest way the request may be charged (per second, per token)."""
    bounds = [token_bound(heard)] if token_priced(price) else []
    if price.audio_second is not None:
        bounds.append(TokenUsage(audio_seconds=heard.seconds))
    return max(price_usage(usage, price, credits_per_usd, adjustment).micros for usage in bounds)


def usage_of(price: Price, heard: Heard, reported: Any) -> TokenUsage:
    """What an answer whose ``usage`` object is ``reported`` (None: it sent none) is charged for."""
    tokens = _token_usage(reported) if token_priced(price) else None
    if tokens is not None:
        return tokens
    if price.audio_second is not None:
        return TokenUsage(audio_seconds=reported_seconds(reported) or heard.seconds)
    return token_bound(heard)


def _token_usage(usage: Any) -> TokenUsage | None:
    """A ``{"type": "tokens", ...}`` usage as the kinds it is billed by; None for any other. Input
    tokens its details leave unexplained are billed as audio (the dearer kind at OpenAI's prices)."""
    if not isinstance(usage, Mapping) or usage.get("type") != "tokens":
        return None
    total_in, total_out = _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))
    if total_in is None or total_out is None:
        return None
    details = usage.get("input_token_details")
    details = details if isinstance(details, Mapping) else {}
    audio, text = _count(details.get("audio_tokens")), _count(details.get("text_tokens"))
    if audio is None:
        audio = total_in - min(text or 0, total_in)
    audio = min(audio, total_in)
    return TokenUsage(input_tokens=total_in - audio, output_tokens=total_out, audio_input_tokens=audio)


def reported_seconds(usage: Any) -> int | None:
    """The seconds the upstream says it billed (``{"type": "duration", "seconds": N}``), whole, rounded
    up; None when it reports none (a translation, a token-counting model)."""
    if not isinstance(usage, Mapping) or usage.get("type") != "duration":
        return None
    seconds = usage.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
        return None
    return math.ceil(Decimal(repr(seconds)))  # Decimal's // truncates: -(-x // 1) would round down


def _count(value: Any) -> int | None:
    """A count as reported: a non-negative integer, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
