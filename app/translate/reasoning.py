"""Reasoning that survives a round trip through a client of another protocol.

A provider takes its model's earlier reasoning back only in its own opaque form: Anthropic a
thinking block with its ``signature`` (or a redacted block's ``data``), OpenAI a reasoning item's
``encrypted_content``. Coding agents send back whatever they were given, in their protocol's slot
for it. So when an answer is translated, that state rides in the client protocol's opaque slot —
Anthropic's inside a Responses ``encrypted_content``, OpenAI's inside an Anthropic ``signature`` —
marked so that it is recognised, unwrapped and handed back to the provider it came from on the
next turn (and left out for any other).
"""

from __future__ import annotations

import base64
import json

from app.translate import canonical as c

#: Anthropic's state inside a Responses ``encrypted_content``.
IN_ENCRYPTED = "tollgate:anthropic:"
#: OpenAI's state inside an Anthropic ``signature``.
IN_SIGNATURE = "tollgate:openai:"


def _pack(prefix: str, state: dict[str, str | None]) -> str:
    return prefix + base64.urlsafe_b64encode(json.dumps(state, separators=(",", ":")).encode()).decode()


def _unpack(prefix: str, value: str) -> dict[str, str] | None:
    try:
        state = json.loads(base64.urlsafe_b64decode(value[len(prefix) :].encode()))
    except (ValueError, UnicodeDecodeError):
        return None
    return state if isinstance(state, dict) else None


def encrypted_content(thinking: c.Thinking) -> str | None:
    """What a Responses client gets as the reasoning item's ``encrypted_content``."""
    if thinking.openai:
        return thinking.encrypted
    if thinking.anthropic:
        return _pack(
            IN_ENCRYPTED, {"text": thinking.text, "signature": thinking.signature, "redacted": thinking.redacted}
        )
    return None


def from_encrypted_content(item_id: str | None, encrypted: str | None, text: str) -> c.Thinking:
    """A Responses client's reasoning item, as the provider it came from wrote it."""
    if encrypted and encrypted.startswith(IN_ENCRYPTED):
        state = _unpack(IN_ENCRYPTED, encrypted) or {}
        return c.Thinking(str(state.get("text") or ""), state.get("signature"), state.get("redacted"))
    return c.Thinking(text, item_id=item_id, encrypted=encrypted)


def signature(thinking: c.Thinking) -> str:
    """What a Messages client gets as the thinking block's ``signature``."""
    if thinking.openai:
        return _pack(IN_SIGNATURE, {"id": thinking.item_id, "encrypted": thinking.encrypted})
    return thinking.signature or ""


def from_signature(text: str, value: str | None) -> c.Thinking:
    """A Messages client's thinking block, as the provider it came from wrote it."""
    if value and value.startswith(IN_SIGNATURE):
        state = _unpack(IN_SIGNATURE, value) or {}
        return c.Thinking(text, item_id=state.get("id"), encrypted=state.get("encrypted"))
    return c.Thinking(text, signature=value or None)
