"""Counting tokens offline: OpenAI's o200k_base tokenizer (vendored) and the rules built on it.

``counting`` holds the rules per model family, ``prompt`` finds the pieces of a request in each wire
protocol, ``encoding`` loads the tokenizer and ``image_size`` reads image headers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

from app.tokens.counting import RULES, Rules, TokenizerName
from app.tokens.gemini_prompt import gemini_prompt
from app.tokens.prompt import Tally, chat_prompt, messages_prompt, responses_prompt

Protocol = Literal["chat", "responses", "messages", "gemini"]

PROMPT_COUNTERS: dict[Protocol, Callable[[dict[str, Any], Rules], Tally]] = {
    "chat": chat_prompt,
    "responses": responses_prompt,
    "messages": messages_prompt,
    "gemini": gemini_prompt,
}


@dataclass(frozen=True, slots=True)
class PromptSize:
    tokens: int
    images: int  # how many images it carries (refused for a model without vision)


def rules_for(tokenizer: str | None, wire: str) -> Rules:
    """A model's rules: its ``tokenizer`` setting, else by the wire its upstream speaks (Anthropic
    Messages → the Anthropic estimate; OpenAI chat and responses, the demo included → o200k)."""
    if tokenizer is not None:
        return RULES[cast(TokenizerName, tokenizer)]  # the settings accept only the names RULES holds
    return RULES["anthropic" if wire == "messages" else "o200k"]


def prompt_size(body: dict[str, Any], protocol: Protocol, rules: Rules) -> PromptSize:
    """The prompt's tokens under ``rules`` (the same rules whichever protocol the body speaks)."""
    tally = PROMPT_COUNTERS[protocol](body, rules)
    return PromptSize(tally.done(), tally.images)


def prompt_tokens(body: dict[str, Any], protocol: Protocol, rules: Rules) -> int:
    return prompt_size(body, protocol, rules).tokens
