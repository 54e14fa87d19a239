"""Generated bodies for ``POST /v1/embeddings``: a valid request, then fields set to hostile values
(the input in every shape and none, huge and odd numbers, deep and wide arrays, control characters),
unknown fields, fields dropped, and the bytes damaged (cut, bad UTF-8, not JSON at all)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.support.fuzz.bodies import SPECIAL_NUMBERS, VALUES, _damaged, _hostile_value, _serialised

FIELDS = ["model", "input", "dimensions", "encoding_format", "user"]

INPUTS = st.one_of(
    st.text(max_size=40),
    st.lists(st.text(max_size=20), max_size=5),
    st.lists(st.integers(-5, 2**33), max_size=6),
    st.lists(st.lists(st.integers(-5, 300_000), max_size=5), max_size=4),
    st.lists(st.one_of(st.text(max_size=5), st.integers(0, 9), st.booleans(), st.none()), max_size=4),
    st.sampled_from(["[[fail:500]]", "x [[fail:429]]", "x [[no-usage]]", "x" * 100_000, [[1] * 9000]]),
)


def valid(model: str) -> dict[str, Any]:
    return {"model": model, "input": ["hello world", "the quick brown fox"], "encoding_format": "float"}


@st.composite
def embeddings_bodies(draw: st.DrawFn, model: str) -> bytes:
    """One embeddings body naming ``model``, as the bytes sent."""
    body = valid(model)
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["input", "input", "option", "set", "unknown", "drop"]))
        if action == "input":
            body["input"] = draw(INPUTS)
        elif action == "option":
            name = draw(st.sampled_from(["dimensions", "encoding_format", "user"]))
            body[name] = draw(st.one_of(SPECIAL_NUMBERS, st.sampled_from(["float", "base64", "hex", ""]), VALUES))
        elif action == "set":
            body[draw(st.sampled_from(FIELDS))] = _hostile_value(draw)
        elif action == "unknown":
            body[draw(st.text(min_size=1, max_size=12))] = _hostile_value(draw)
        elif body:
            body.pop(draw(st.sampled_from(sorted(body))))
    return _damaged(draw, _serialised(body))
