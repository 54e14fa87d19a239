"""What a request used, by the kind it is billed as: the record a charge keeps (``UsageRecord``)
and the typed value billing reads (``TokenUsage``); :mod:`domain.pricing` prices it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict


class UsageRecord(TypedDict):
    """A request's usage as its charge stores it (``TokenUsage.as_record``): the kinds that came
    later only when used, so a charge recorded before them reads the same."""

    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_hit_tokens: int
    cache_write_1h_tokens: NotRequired[int]
    service_tier: NotRequired[str]
    tool_calls: NotRequired[dict[str, int]]  # tool → calls the upstream says it made
    image_input_tokens: NotRequired[int]
    image_output_tokens: NotRequired[int]
    images: NotRequired[dict[str, int]]  # "SIZE/QUALITY" → images charged at that price
    audio_seconds: NotRequired[int]  # seconds of audio transcribed or translated
    input_characters: NotRequired[int]  # characters of text spoken (speech)
    audio_input_tokens: NotRequired[int]  # audio tokens a transcription model read


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """What one request used, by the kind it is billed as.

    ``input_tokens`` are the prompt tokens that were neither written to nor read from a cache;
    ``cache_write_tokens`` those written with the default (5-minute) lifetime and
    ``cache_write_1h_tokens`` those written for an hour; the prompt as a whole is the sum of the
    four prompt kinds. ``service_tier`` is the tier the upstream says it served the request at
    (``""``: it did not say), and ``tool_calls`` the provider-run tool calls it says it made.
    An image model's answer adds ``image_input_tokens`` and ``image_output_tokens`` (its text tokens
    are ``input_tokens`` and ``output_tokens``), or ``images``: the images billed per image, by the
    ``SIZE/QUALITY`` price they are billed at. A transcription model billed by tokens adds
    ``audio_input_tokens`` (the audio it heard; its prompt's text tokens are ``input_tokens``, its
    transcript ``output_tokens``).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_hit_tokens: int = 0
    cache_write_1h_tokens: int = 0
    service_tier: str = ""
    tool_calls: tuple[tuple[str, int], ...] = ()
    image_input_tokens: int = 0
    image_output_tokens: int = 0
    images: tuple[tuple[str, int], ...] = ()
    #: Seconds of audio transcribed or translated, and characters of text spoken (speech).
    audio_seconds: int = 0
    input_characters: int = 0
    audio_input_tokens: int = 0

    def __post_init__(self) -> None:
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_write_tokens",
            "cache_hit_tokens",
            "cache_write_1h_tokens",
            "image_input_tokens",
            "image_output_tokens",
            "audio_seconds",
            "input_characters",
            "audio_input_tokens",
        ):
            _check_count(name, getattr(self, name))
        for tool, calls in self.tool_calls:
            _check_count(f"tool_calls[{tool!r}]", calls)
        for kind, count in self.images:
            _check_count(f"images[{kind!r}]", count)

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_write_tokens + self.cache_write_1h_tokens + self.cache_hit_tokens

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    @property
    def all_cache_writes(self) -> int:
        return self.cache_write_tokens + self.cache_write_1h_tokens

    def as_record(self) -> UsageRecord:
        """The usage as stored in a charge event (the kinds that came later only when used)."""
        record: UsageRecord = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_hit_tokens": self.cache_hit_tokens,
        }
        if self.cache_write_1h_tokens:
            record["cache_write_1h_tokens"] = self.cache_write_1h_tokens
        if self.service_tier:
            record["service_tier"] = self.service_tier
        if self.tool_calls:
            record["tool_calls"] = dict(self.tool_calls)
        if self.image_input_tokens:
            record["image_input_tokens"] = self.image_input_tokens
        if self.image_output_tokens:
            record["image_output_tokens"] = self.image_output_tokens
        if self.images:
            record["images"] = dict(self.images)
        if self.audio_seconds:
            record["audio_seconds"] = self.audio_seconds
        if self.input_characters:
            record["input_characters"] = self.input_characters
        if self.audio_input_tokens:
            record["audio_input_tokens"] = self.audio_input_tokens
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> TokenUsage:
        return cls(
            record["input_tokens"],
            record["output_tokens"],
            record["cache_write_tokens"],
            record["cache_hit_tokens"],
            record.get("cache_write_1h_tokens", 0),
            record.get("service_tier", ""),
            tool_calls_of(record.get("tool_calls") or {}),
            record.get("image_input_tokens", 0),
            record.get("image_output_tokens", 0),
            tool_calls_of(record.get("images") or {}),
            audio_seconds=record.get("audio_seconds", 0),
            input_characters=record.get("input_characters", 0),
            audio_input_tokens=record.get("audio_input_tokens", 0),
        )


def tool_calls_of(calls: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """Tool calls as :class:`TokenUsage` keeps them: sorted by tool, the tools never called left out."""
    return tuple(sorted((tool, n) for tool, n in calls.items() if n))


def _check_count(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
