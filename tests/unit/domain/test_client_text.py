"""The one rule for text a client sends that the ledger records (``domain/client_text.py``)."""

from __future__ import annotations

import pytest

from domain.client_text import ClientTextError, checked_text, describe, header_text


@pytest.mark.parametrize("value", ["alice", "caf\u00e9", "\u5927\u962a", "a b=c", "emoji \U0001f600", "", "tab-free"])
def test_text_that_follows_the_rule_is_kept_as_it_is(value):
    assert checked_text(value, "user", 64) is value


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("a\u0000b", "U+0000"),
        ("a\tb", "U+0009"),
        ("a\x1bb", "U+001B"),
        ("a\x7fb", "U+007F"),
        ("a\x85b", "U+0085"),
        ("a\x9fb", "U+009F"),
        ("a\u061cb", "U+061C (ARABIC LETTER MARK)"),
        ("a\u200eb", "U+200E (LEFT-TO-RIGHT MARK)"),
        ("a\u200fb", "U+200F"),
        ("a\u202ab", "U+202A"),
        ("a\u202eb", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
        ("a\u2066b", "U+2066"),
        ("a\u2069b", "U+2069"),
        ("a\ud800b", "U+D800"),
    ],
)
def test_nul_controls_bidi_controls_and_surrogates_are_refused_saying_which_and_where(value, shown):
    with pytest.raises(ClientTextError) as refused:
        checked_text(value, "user", 64)
    assert refused.value.field == "user"
    assert shown in refused.value.problem
    assert "at character 2" in refused.value.problem
    assert value[1] not in str(refused.value)  # the message never carries the character itself


def test_text_over_its_bound_is_refused():
    assert checked_text("x" * 8, "reason", 8) == "x" * 8
    with pytest.raises(ClientTextError, match="at most 8 characters"):
        checked_text("x" * 9, "reason", 8)


def test_a_header_is_read_as_utf8_never_as_latin1():
    sent = "project=caf\u00e9 \u202e".encode()  # as the bytes came, which the server hands over as Latin-1
    assert header_text(sent.decode("latin-1"), "x-tollgate-tags") == "project=caf\u00e9 \u202e"
    assert header_text("plain", "x") == "plain"
    with pytest.raises(ClientTextError, match="not valid UTF-8"):
        header_text(b"caf\xe9".decode("latin-1"), "x-tollgate-tags")


def test_describe_names_a_character_by_its_code_point():
    assert describe("\u202e") == "U+202E (RIGHT-TO-LEFT OVERRIDE)"
    assert describe("\x00") == "U+0000"
