"""Reasoning carried through a client of another protocol comes back to its provider intact."""

from __future__ import annotations

from app.translate import canonical as c
from app.translate import reasoning


def test_anthropic_thinking_survives_a_responses_client():
    thinking = c.Thinking("Let me think: ünïcode ✓", signature="EqQBCkgIARAB" * 20)
    encrypted = reasoning.encrypted_content(thinking)
    assert encrypted is not None
    assert encrypted.startswith(reasoning.IN_ENCRYPTED)
    back = reasoning.from_encrypted_content("rs_1", encrypted, "a summary the client may have shortened")
    assert back == thinking
    assert back.anthropic
    assert not back.openai


def test_redacted_thinking_survives_too():
    redacted = c.Thinking("", redacted="opaque-data")
    assert reasoning.from_encrypted_content("rs_2", reasoning.encrypted_content(redacted), "") == redacted


def test_openai_reasoning_survives_a_messages_client():
    item = c.Thinking("summary", item_id="rs_abc", encrypted="gAAAAB-opaque")
    signature = reasoning.signature(item)
    assert signature.startswith(reasoning.IN_SIGNATURE)
    back = reasoning.from_signature("summary", signature)
    assert back == item
    assert back.openai
    assert not back.anthropic


def test_native_state_is_left_as_it_is():
    assert reasoning.signature(c.Thinking("t", signature="sig")) == "sig"
    assert reasoning.from_signature("t", "sig") == c.Thinking("t", signature="sig")
    assert reasoning.encrypted_content(c.Thinking("t", item_id="rs", encrypted="enc")) == "enc"
    assert reasoning.from_encrypted_content("rs", "enc", "t") == c.Thinking("t", item_id="rs", encrypted="enc")
    assert reasoning.encrypted_content(c.Thinking("reasoning_content from a chat upstream")) is None


def test_a_damaged_wrapper_is_not_a_crash():
    assert reasoning.from_signature("t", reasoning.IN_SIGNATURE + "%%%") == c.Thinking("t")
