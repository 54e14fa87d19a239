"""Upstream adapters: the code that knows how to talk to model providers.

Each adapter speaks one wire protocol as JSON dicts (``wire`` says which); :mod:`.canonical` speaks
to any of them in the gateway's canonical terms.
"""

from app.upstream.anthropic import AnthropicUpstream
from app.upstream.base import RawStream, Upstream
from app.upstream.demo import DemoUpstream
from app.upstream.openai import OpenAIUpstream

__all__ = ["AnthropicUpstream", "DemoUpstream", "OpenAIUpstream", "RawStream", "Upstream"]
