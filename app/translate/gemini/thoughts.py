"""Reasoning that survives a round trip through a Gemini client (``app/translate/reasoning.py``).

Gemini's parts carry the model's opaque reasoning state as ``thoughtSignature`` — bytes, sent as
base64 — and its SDK sends back whatever it was given. When another provider's answer is translated
for a Gemini client, that provider's state (Anthropic's ``signature`` or redacted data, OpenAI's
encrypted reasoning item) rides there, marked, so that the next turn hands it back to the provider
it came from; a signature that is not Tollgate's is Gemini's own, which no other provider takes.
"""

from __future__ import annotations

import base64
import binascii
import json

from app.translate import canonical as c

#: What begins the bytes of a signature Tollgate wrote.
MARK = b"tollgate:"


def signature_of(thinking: c.Thinking) -> str | None:
    """The ``thoughtSignature`` a Gemini client gets for ``thinking`` (None: it has no state)."""
    if not (thinking.anthropic or thinking.openai):
        return None
    state = {
        "signature": thinking.signature,
        "redacted": thinking.redacted,
        "id": thinking.item_id,
        "encrypted": thinking.encrypted,
    }
    packed = MARK + json.dumps({k: v for k, v in state.items() if v}, separators=(",", ":")).encode()
    return base64.b64encode(packed).decode()


def _decoded(signature: str) -> bytes | None:
    """Base64 in either alphabet, padded or not (the SDK re-encodes what it read)."""
    normal = signature.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(normal + "=" * (-len(normal) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def thinking_from_signature(text: str, signature: str | None) -> c.Thinking:
    """A thought part (its ``text``) with the provider's state its signature carries, if Tollgate's."""
    raw = _decoded(signature) if signature else None
    if raw is None or not raw.startswith(MARK):
        return c.Thinking(text)
    try:
        state = json.loads(raw[len(MARK) :])
    except (ValueError, UnicodeDecodeError):
        return c.Thinking(text)
    if not isinstance(state, dict):
        return c.Thinking(text)
    values = {k: v if isinstance(v, str) else None for k, v in state.items()}
    return c.Thinking(text, values.get("signature"), values.get("redacted"), values.get("id"), values.get("encrypted"))
