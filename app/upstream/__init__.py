"""Upstream adapters: the code that knows how to talk to model providers.

Each adapter speaks one wire protocol as JSON dicts (``wire`` says which); the routes either pass
a client's body through to an upstream of its own protocol, or translate it
(``app/http/exchange.py``).
"""

from app.upstream.anthropic import AnthropicUpstream
from app.upstream.base import RawStream, Upstream
from app.upstream.demo import DemoUpstream
from app.upstream.openai import OpenAIResponsesUpstream, OpenAIUpstream

__all__ = ["AnthropicUpstream", "DemoUpstream", "OpenAIResponsesUpstream", "OpenAIUpstream", "RawStream", "Upstream"]
