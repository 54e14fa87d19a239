"""Upstream adapters: the code that knows how to talk to model providers.

Every adapter speaks OpenAI Chat Completions bodies (``dict``) on its Tollgate side, which is the
gateway's canonical form for now; an adapter for another protocol translates at its edge.
"""

from app.upstream.base import ChatStream, ChatUpstream
from app.upstream.demo import DemoUpstream
from app.upstream.openai import OpenAIUpstream

__all__ = ["ChatStream", "ChatUpstream", "DemoUpstream", "OpenAIUpstream"]
