"""Sizing a request's prompt before it goes anywhere, and refusing one the model cannot take.

The count is made once per request, before the hold: it sizes the hold's worst case, stands in for
the prompt's usage when the upstream reports none, and is checked against the model's
``context_window`` — a prompt over it is a 400 and the upstream is never called. The same walk
finds the prompt's images, which a model without vision refuses, whatever protocol they came in.
"""

from __future__ import annotations

from typing import Any

import anyio

from app.errors import InvalidRequest
from app.tokens import PromptSize, Protocol, prompt_size, rules_for
from app.tokens.counting import Rules
from domain.settings import Model

#: Bodies larger than this are counted in a worker thread (the tokenizer releases the GIL), so one
#: huge prompt does not stall every other request on the event loop.
THREAD_ABOVE_BYTES = 256 * 1024
_PARAM: dict[Protocol, str] = {"chat": "messages", "responses": "input", "messages": "messages", "gemini": "contents"}


def model_rules(model: Model, wire: str) -> Rules:
    return rules_for(model.tokenizer, wire)


async def count_prompt(model: Model, wire: str, body: dict[str, Any], protocol: Protocol, body_size: int) -> PromptSize:
    """The prompt's token count under the model's rules, and its images."""
    rules = model_rules(model, wire)
    if body_size > THREAD_ABOVE_BYTES:
        return await anyio.to_thread.run_sync(prompt_size, body, protocol, rules)
    return prompt_size(body, protocol, rules)


async def measure_prompt(model: Model, wire: str, body: dict[str, Any], protocol: Protocol, body_size: int) -> int:
    """The prompt's token count under the model's rules; 400 if it exceeds the context window, or
    carries images for a model without vision."""
    size = await count_prompt(model, wire, body, protocol, body_size)
    if size.images and not model.vision:
        raise InvalidRequest(f"The model `{model.id}` does not support images.", param=_PARAM[protocol])
    if size.tokens > model.context_window:
        raise InvalidRequest(
            f"This model's maximum context length is {model.context_window} tokens. However, your messages "
            f"resulted in {size.tokens} tokens. Please reduce the length of the messages.",
            param=_PARAM[protocol],
            code="context_length_exceeded",
        )
    return size.tokens
