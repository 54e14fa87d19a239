"""Counting tokens offline: OpenAI's o200k_base tokenizer (vendored) and the rules built on it.

``counting`` holds the rules per model family, ``prompt`` finds the pieces of a request in each wire
protocol, ``encoding`` loads the tokenizer and ``image_size`` reads image headers.
"""

from __future__ import annotations

from typing import Any, Callable, Literal

from app.tokens.counting import RULES, Rules
from app.tokens.prompt import chat_prompt_tokens, messages_prompt_tokens, responses_prompt_tokens

Protocol = Literal["chat", "responses", "messages"]

PROMPT_COUNTERS: dict[Protocol, Callable[[dict[str, Any], Rules], int]] = {
    "chat": chat_prompt_tokens,
    "responses": responses_prompt_tokens,
    "messages": messages_prompt_tokens,
}


def rules_for(tokenizer: str | None, wire: str) -> Rules:
    """A model's rules: its ``tokenizer`` setting, else by the wire its upstream speaks (Anthropic
    Messages → the Anthropic estimate; OpenAI chat, the demo included → o200k)."""
    if tokenizer is not None:
        return RULES[tokenizer]  # type: ignore[index]
    return RULES["anthropic" if wire == "messages" else "o200k"]


def prompt_tokens(body: dict[str, Any], protocol: Protocol, rules: Rules) -> int:
    """The prompt's tokens under ``rules``: the same rules whichever protocol the body speaks."""
    return PROMPT_COUNTERS[protocol](body, rules)
