"""Splicing the client's model into an upstream's JSON bytes: exact or not at all. Every splice that
is made must decode to the object with only its top-level ``model`` (and ``usage``) changed; text
that only looks like the member (nested, inside a string, after an escaped quote, in another form)
is never touched."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from app.translate.raw_json import UNSET, Splicer

splicer = Splicer("fake-gpt")


def decoded(data: bytes) -> Any:
    return msgspec.json.decode(data)


CASES = [
    # (upstream's object, its model, its usage, the usage wanted, whether one object alone is spliced)
    (b'{"id":"c","model":"gpt-x","choices":[],"usage":null}', "gpt-x", None, None, True),
    (b'{"id":"c","model":"gpt-x","choices":[],"usage":null}', "gpt-x", None, UNSET, True),
    (b'{"usage":null,"id":"c","model":"gpt-x"}', "gpt-x", None, UNSET, True),  # usage the first member
    (b'{"id":"c","model":"gpt-x"}', "gpt-x", UNSET, None, True),  # usage null added
    (b'{"model":"gpt-x"}', "gpt-x", UNSET, UNSET, True),
    (b'{"id": "c", "model": "gpt-x", "usage": null}', "gpt-x", None, UNSET, True),  # spaced, as some servers write
    (b'{"content":"say \\"model\\":\\"gpt-x\\"","model":"gpt-x"}', "gpt-x", UNSET, UNSET, True),  # the text in a string
    (b'{"model":"gpt-x","x":{"model":"gpt-x"}}', "gpt-x", UNSET, UNSET, True),  # nested after: left alone
    (b'{"model":"fake-gpt","usage":null}', "fake-gpt", None, UNSET, True),  # already the client's
    (b'{"x":{"model":"gpt-x"},"model":"gpt-x"}', "gpt-x", UNSET, UNSET, False),  # nested first
    (b'{"a\\"model":"gpt-x","model" : "gpt-x"}', "gpt-x", UNSET, UNSET, False),  # a key ending in an escaped quote
    (b'{"model":"gpt\\u002dx"}', "gpt-x", UNSET, UNSET, False),  # the name escaped: not found
    (b'{"model":"gpt-x","x":{"usage":null},"usage":null}', "gpt-x", None, UNSET, False),  # a nested null usage too
    (b'{"model":"gpt-x","usage":null}', 7, None, None, False),  # a model that is not a string
]


def expected_after(data: bytes, wanted: Any) -> dict[str, Any]:
    expected = {**decoded(data), "model": "fake-gpt"}
    if wanted is UNSET:
        expected.pop("usage", None)
    else:
        expected["usage"] = None
    return expected


def assert_exact(spliced: bytes, data: bytes, wanted: Any) -> None:
    """``spliced`` is ``data`` with only its top-level model and usage changed, no member moved."""
    expected, found = expected_after(data, wanted), decoded(spliced)
    assert found == expected
    assert list(found) == [k for k in expected if k in found]


@pytest.mark.parametrize(("data", "model", "usage", "wanted", "spliced_alone"), CASES)
def test_a_splice_changes_the_top_level_model_and_usage_and_nothing_else(
    data: bytes, model: str, usage: Any, wanted: Any, spliced_alone: bool
) -> None:
    spliced = splicer.splice(data, model, usage, wanted)
    assert (spliced is not None) == spliced_alone
    if spliced is not None:
        assert_exact(spliced, data, wanted)


def test_the_common_chunk_is_spliced_in_place() -> None:
    chunk = (
        b'{"id":"c","object":"chat.completion.chunk","model":"gpt-x",'
        b'"choices":[{"delta":{"content":"hi"}}],"usage":null}'
    )
    assert splicer.splice(chunk, "gpt-x", None, None) == chunk.replace(b'"gpt-x"', b'"fake-gpt"')
    assert splicer.splice(chunk, "gpt-x", None, UNSET) == chunk.replace(b'"gpt-x"', b'"fake-gpt"').replace(
        b',"usage":null', b""
    )


@pytest.mark.parametrize(("data", "model", "usage", "wanted", "spliced_alone"), CASES)
def test_objects_spliced_together_are_spliced_exactly_or_not_at_all(
    data: bytes, model: str, usage: Any, wanted: Any, spliced_alone: bool
) -> None:
    plain = b'{"id":"c","model":"gpt-x","usage":null}'
    objects = [plain, data, plain] if model == "gpt-x" and usage is None else [data]
    nulls = sum(decoded(o).get("usage", UNSET) is None for o in objects)
    together = splicer.splice_all(b"\r".join(objects), len(objects), model, nulls, wanted)
    if together is not None:
        spliced = together.split(b"\r")
        assert len(spliced) == len(objects)
        for one, data_of_one in zip(spliced, objects, strict=True):
            assert_exact(one, data_of_one, wanted)


def test_objects_spliced_together_must_all_name_the_model_once() -> None:
    a = b'{"model":"gpt-x","usage":null}'
    nested = b'{"model":"gpt-x","x":{"model":"gpt-x"},"usage":null}'
    assert splicer.splice_all(b"\r".join([a, a]), 2, "gpt-x", 2, None) == b"\r".join([a, a]).replace(
        b"gpt-x", b"fake-gpt"
    )
    assert splicer.splice_all(b"\r".join([a, nested]), 2, "gpt-x", 2, None) is None
    other = b'{"model":"gpt-y","usage":null}'
    assert splicer.splice_all(b"\r".join([a, other]), 2, "gpt-x", 2, None) is None
