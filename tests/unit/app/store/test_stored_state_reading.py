"""A stored event's state is read for its leaf by msgspec, and by the standard library where msgspec
refuses: whatever the bytes, the value read is the one ``json.loads(raw, parse_float=str)`` reads (the
leaf of every event already logged stays the same bytes), or both refuse."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.store.log_append import _state_of

_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(1 << 70), 1 << 70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


def _stdlib(raw: bytes) -> object:
    return json.loads(raw, parse_float=str)


def _same_or_both_refuse(raw: bytes) -> None:
    try:
        expected = _stdlib(raw)
    except ValueError as refused:
        with pytest.raises(type(refused)):
            _state_of(raw)
        return
    assert repr(_state_of(raw)) == repr(expected)  # repr: the types too (an int stays an int, a float its text)


@settings(max_examples=300, deadline=None)
@given(value=_values, ascii_only=st.booleans())
def test_json_as_the_store_writes_it_is_read_as_the_standard_library_reads_it(value, ascii_only):
    _same_or_both_refuse(json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))


@settings(max_examples=300, deadline=None)
@given(value=_values, cut=st.integers(0, 200), junk=st.binary(max_size=3))
def test_damaged_bytes_are_read_or_refused_as_the_standard_library_does(value, cut, junk):
    raw = json.dumps(value).encode()
    at = min(cut, len(raw))
    _same_or_both_refuse(raw[:at] + junk + raw[at:])


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":NaN}',
        b'{"a":Infinity}',
        b'\xef\xbb\xbf{"a":1}',
        b'{"a":"\\ud800"}',
        '{"a":1.5}'.encode("utf-16"),
        '{"a":1.5}'.encode("utf-16-le"),
        b'{"a":"\xff"}',
        b'{"a":1,"a":2.50}',
        b'{"a":123456789012345678901234567890,"b":1e400,"c":-0.0}',
    ],
)
def test_what_msgspec_refuses_is_read_by_the_standard_library(raw):
    _same_or_both_refuse(raw)
