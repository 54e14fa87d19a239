"""Upstream adapters: the code that knows how to talk to model providers.

Each adapter speaks one wire protocol (``wire`` says which): requests as JSON dicts, answers and
stream events as the upstream's JSON text, read once and decoded on demand; the routes either pass
a client's body through to an upstream of its own protocol, or translate it
(``app/translate/exchange.py``).
"""

from app.upstream.anthropic import AnthropicUpstream
from app.upstream.base import Answer, RawStream, StreamEvent, Upstream
from app.upstream.demo import DemoUpstream
from app.upstream.openai import OpenAIResponsesUpstream, OpenAIUpstream

__all__ = [
    "Answer",
    "AnthropicUpstream",
    "DemoUpstream",
    "OpenAIResponsesUpstream",
    "OpenAIUpstream",
    "RawStream",
    "StreamEvent",
    "Upstream",
]
