"""The canonical leaf of a ledger event: exact bytes anyone can recompute, the same for the same
event however its fields were ordered or its instant zoned, and hostile text either written one way
or refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.transparency.event_leaf import LeafEncodingError, canonical_json, event_leaf
from domain.transparency.hashing import leaf_hash

INSTANT = datetime(2025, 1, 31, 12, 0, 0, 250, tzinfo=UTC)


def test_an_events_leaf_is_exactly_these_bytes():
    data = {"request_id": "r-1", "cost": 1_250_000, "balance_after": 98_750_000, "tags": ["a", "b"], "end_user": None}
    leaf = event_leaf("acme", 7, "TeamLedger.Charged", INSTANT, data)
    assert leaf == (
        b'{"data":{"balance_after":98750000,"cost":1250000,"end_user":null,"request_id":"r-1","tags":["a","b"]},'
        b'"format":"tollgate-event/1","instant":"2025-01-31T12:00:00.000250Z","team":"acme",'
        b'"type":"TeamLedger.Charged","version":7}'
    )
    # its leaf hash, as `printf '\x00<the bytes>' | sha256sum` gives it (docs/transparency.md shows the same)
    assert leaf_hash(leaf).hex() == "45fbfcd9a6d814de818576d128425803694ee373ad681088c47c7aa5fb7cf746"


def test_the_same_event_is_the_same_leaf_however_it_is_held():
    zoned = INSTANT.astimezone(timezone(timedelta(hours=-5, minutes=-30)))
    first = event_leaf("acme", 1, "T", INSTANT, {"b": 1, "a": {"y": True, "x": False}})
    second = event_leaf("acme", 1, "T", zoned, {"a": {"x": False, "y": True}, "b": 1})
    assert first == second
    assert event_leaf("acme", 1, "T", INSTANT, {"l": (1, 2)}) == event_leaf("acme", 1, "T", INSTANT, {"l": [1, 2]})


def test_strings_are_escaped_as_rfc_8785_writes_them():
    hostile = 'quote" backslash\\ nul\x00 bell\x07 tab\t newline\n cr\r bs\b ff\f us\x1f del\x7f ls\u2028 é 😀 \ufeff'
    assert canonical_json(hostile) == (
        b'"quote\\" backslash\\\\ nul\\u0000 bell\\u0007 tab\\t newline\\n cr\\r bs\\b ff\\f us\\u001f '
        + "del\x7f ls\u2028 é 😀 \ufeff".encode()
        + b'"'
    )
    assert canonical_json("e\u0301") != canonical_json("\u00e9")  # no normalization: the text as stored


def test_keys_are_sorted_by_utf16_code_units():
    """U+10000 is D800 DC00 in UTF-16, so it sorts before U+FFFF (RFC 8785 §3.2.3), though its code point is higher."""
    assert canonical_json({"\uffff": 1, "\U00010000": 2, "a": 3, "B": 4, "": 5}) == (
        '{"":5,"B":4,"a":3,"\U00010000":2,"\uffff":1}'.encode()
    )


@pytest.mark.parametrize(
    "value",
    [
        "lone \ud800 high surrogate",
        "lone \udfff low surrogate",
        "\ud83d\ude00",  # a surrogate pair spelt as two code points is not the character
        {"key \udc80": 1},
        1.5,
        float("nan"),
        Decimal("1.25"),
        1 << 63,
        -(1 << 63) - 1,
        {1: "integer key"},
        b"bytes",
        {"a": {1, 2}},
        INSTANT,
    ],
)
def test_what_has_no_canonical_form_is_refused(value):
    with pytest.raises(LeafEncodingError):
        canonical_json(value)
    with pytest.raises(LeafEncodingError):
        event_leaf("acme", 1, "T", INSTANT, {"field": value})


def test_the_integer_range_is_signed_64_bits_and_booleans_are_not_integers():
    assert canonical_json([(1 << 63) - 1, -(1 << 63), 0, -0, True, False]) == (
        b"[9223372036854775807,-9223372036854775808,0,0,true,false]"
    )


def test_nesting_is_bounded():
    deep: object = 1
    for _ in range(32):
        deep = [deep]
    assert canonical_json(deep) == b"[" * 32 + b"1" + b"]" * 32
    with pytest.raises(LeafEncodingError):
        canonical_json([deep])


@pytest.mark.parametrize(
    ("team", "version", "type_name", "instant"),
    [
        ("", 1, "T", INSTANT),
        ("acme", 1, "", INSTANT),
        ("acme", 0, "T", INSTANT),
        ("acme", True, "T", INSTANT),
        ("acme", 1, "T", datetime(2025, 1, 31, 12, 0)),  # no time zone: which instant?  # noqa: DTZ001
        ("acme\ud800", 1, "T", INSTANT),
    ],
)
def test_an_event_without_a_team_type_version_or_zoned_instant_is_refused(team, version, type_name, instant):
    with pytest.raises(LeafEncodingError):
        event_leaf(team, version, type_name, instant, {})


def test_early_years_keep_four_digits():
    leaf = event_leaf("acme", 1, "T", datetime(5, 1, 1, 1, tzinfo=timezone(timedelta(hours=2))), {})
    assert b'"instant":"0004-12-31T23:00:00.000000Z"' in leaf


_bmp_text = st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",)))
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 63) - 1) | _bmp_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_bmp_text, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=_json)
def test_for_text_within_the_bmp_it_is_what_pythons_json_writes_sorted_and_compact(value):
    """An independent check: Python's json module, with sorted keys, no whitespace and no ASCII escaping,
    writes the same bytes whenever key order by code point and by UTF-16 agree (keys within the BMP)."""
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert canonical_json(value) == expected
    assert json.loads(canonical_json(value)) == value


_any_text = st.text(st.characters(exclude_categories=("Cs",)))
_any_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 64), 1 << 64) | _any_text | st.floats(allow_nan=False),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_any_text, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(value=_any_json)
def test_the_fast_path_writes_or_refuses_exactly_what_the_exact_encoder_does(value):
    """The C encoder's fast path and the exact encoder agree on every value: the same bytes, or both
    refuse (floats, integers beyond 64 bits, keys beyond the BMP sorted by UTF-16)."""
    from domain.transparency.event_leaf import _encode

    try:
        exact = _encode(value, 0).encode("utf-8")
    except LeafEncodingError:
        with pytest.raises(LeafEncodingError):
            canonical_json(value)
        return
    assert canonical_json(value) == exact
