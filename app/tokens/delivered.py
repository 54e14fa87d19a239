"""What a client was sent of an answer, and the usage to bill for it when the upstream's count is
missing or incomplete (a stream that broke, a client that hung up, an upstream without usage).

A relay only appends the pieces it has sent — text, thinking, each tool call's name and arguments —
under a key per sequence (a choice's text, a tool call's arguments, …); they are tokenised once, at
settlement, each sequence as a whole (tokenising delta by delta would count the boundaries between
deltas as extra tokens). With the o200k rules the count is exact for the text an OpenAI model sent.
"""

from __future__ import annotations

from collections.abc import Hashable

from app.tokens.counting import Rules
from domain.usage import TokenUsage


class Delivered:
    """The pieces of an answer a client was sent, and what the upstream reported so far."""

    __slots__ = ("_pieces", "_tool_calls", "prompt_tokens", "reported", "rules")

    def __init__(self, rules: Rules, prompt_tokens: int) -> None:
        self.rules = rules
        self.prompt_tokens = prompt_tokens  # the gateway's own count of the prompt
        self.reported: TokenUsage | None = None  # the upstream's latest (possibly partial) usage
        self._pieces: dict[Hashable, list[str]] = {}
        self._tool_calls = 0

    def add(self, key: Hashable, piece: str) -> None:
        if piece:
            self._pieces.setdefault(key, []).append(piece)

    # Canonical streams carry one answer: its text, its thinking, and tool calls one after another.
    def text(self, piece: str) -> None:
        self.add("text", piece)

    def thinking(self, piece: str) -> None:
        self.add("thinking", piece)

    def tool_call(self, name: str) -> None:
        self._tool_calls += 1
        self.add(("tool", self._tool_calls), name)

    def arguments(self, piece: str) -> None:
        self.add(("arguments", max(self._tool_calls, 1)), piece)

    def __bool__(self) -> bool:
        return bool(self._pieces)

    def output_tokens(self) -> int:
        return sum(self.rules.text("".join(pieces)) for pieces in self._pieces.values())

    def usage(self) -> TokenUsage:
        """Usage for what was delivered: the upstream's prompt count when it reported one (Anthropic
        does at the start of a stream), else the gateway's; the output always counted here."""
        output = self.output_tokens()
        reported = self.reported
        if reported is not None and reported.prompt_tokens > 0:
            return TokenUsage(
                input_tokens=reported.input_tokens,
                output_tokens=output,
                cache_write_tokens=reported.cache_write_tokens,
                cache_hit_tokens=reported.cache_hit_tokens,
                cache_write_1h_tokens=reported.cache_write_1h_tokens,
                service_tier=reported.service_tier,
                tool_calls=reported.tool_calls,
            )
        return TokenUsage(input_tokens=self.prompt_tokens, output_tokens=output)
