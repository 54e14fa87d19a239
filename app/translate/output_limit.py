"""A request's output limit lowered to what its team's balance covers (``clamp_output_to_balance``),
or to what its model produces (``clamp_output_to_model``).

Coding agents ask for 32,000 to 64,000 output tokens by default, and a hold for that many is more
than a small balance covers although the answer would cost cents. A key (or team) that opted in has
its request's output limit set to what the available balance covers instead of a 402, and the answer
says so in a header. The limit is set in the body as it goes upstream, in that wire's own field.
LiteLLM, given a model id it does not know, asks 128,000; a model that opted in serves such a request
with its own limit instead of a 400, said in the same header; that limit is set in the client's body,
in its protocol's field, before the request is translated for any other upstream.
"""

from __future__ import annotations

from typing import Any

#: Below this many output tokens a clamped request is refused instead (the Responses API refuses
#: a smaller limit, and no agent can do anything useful with less).
MIN_CLAMPED_OUTPUT = 16
#: Anthropic's smallest thinking budget; a clamped limit at or below it serves the turn without thinking.
MIN_THINKING_BUDGET = 1024


def clamp_output(body: dict[str, Any], wire: str, tokens: int) -> dict[str, Any]:
    """``body`` (going to an upstream speaking ``wire``) asking for at most ``tokens`` output tokens."""
    out = dict(body)
    if wire == "messages":
        out["max_tokens"] = tokens
        thinking = body.get("thinking")
        budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
        if isinstance(budget, int) and budget >= tokens:  # the budget must stay below the output limit
            if tokens - 1 >= MIN_THINKING_BUDGET:
                out["thinking"] = {**thinking, "budget_tokens": tokens - 1}  # type: ignore[dict-item]
            else:
                out.pop("thinking")
    elif wire == "responses":
        out["max_output_tokens"] = tokens
    elif wire == "gemini":
        config = body.get("generationConfig")
        out["generationConfig"] = {**(config if isinstance(config, dict) else {}), "maxOutputTokens": tokens}
    elif wire == "converse":
        config = body.get("inferenceConfig")
        out["inferenceConfig"] = {**(config if isinstance(config, dict) else {}), "maxTokens": tokens}
    else:  # each limit the request gives is lowered (one below ``tokens`` stays: the upstream keeps the least)
        present = [name for name in ("max_completion_tokens", "max_tokens") if name in body]
        for name in present or ["max_completion_tokens"]:
            given = body.get(name)
            out[name] = min(given, tokens) if isinstance(given, int) and not isinstance(given, bool) else tokens
    return out
