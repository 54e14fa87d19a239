"""The fake upstream's ``POST /v1/embeddings``, in OpenAI's wire shape byte for byte.

``input`` as a string, strings, a token array or token arrays (OpenAI's 400s for anything else and
for an empty input), ``dimensions`` (default 1,536) and ``encoding_format`` (``float``: an array of
numbers; ``base64``: the little-endian float32 bytes, base64-encoded, as OpenAI sends them). Each
vector is made from its input alone (unit length, the same input always the same vector), so a
test can check what came through. ``usage.prompt_tokens`` counts a text as the fake's chat does
(``tokens``: a word and the whitespace after it) and a token array as its length.

Directives in any text input: ``[[fail:CODE]]`` answers with OpenAI's error of that status,
``[[no-usage]]`` leaves ``usage`` out, ``[[latency:MS]]`` waits first.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import random
import re
import struct
from typing import Any

from tests.support.fake_upstream import Send, _bad, _send_json, openai_failure, openai_request, tokens

DEFAULT_DIMENSIONS = 1536
#: The longest vector the fake makes (text-embedding-3-large's); more is refused, as OpenAI does.
MAX_DIMENSIONS = 3072
_FAIL = re.compile(r"\[\[fail:(\d{3})\]\]")
_LATENCY = re.compile(r"\[\[latency:(\d+)\]\]")


def vector(item: str | list[int], dimensions: int) -> list[float]:
    """The vector the fake gives ``item``: unit length, the same for the same input."""
    rng = random.Random(hashlib.sha256(repr(item).encode()).digest())
    values = [rng.uniform(-1.0, 1.0) for _ in range(dimensions)]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


def _inputs(value: Any) -> list[str | list[int]]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(t, int) for t in value):
        return [value]
    if isinstance(value, list) and value and all(isinstance(t, str) for t in value):
        return list(value)
    if (
        isinstance(value, list)
        and value
        and all(isinstance(t, list) and all(isinstance(x, int) for x in t) for t in value)
    ):
        return list(value)
    raise _bad("'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.")


def prompt_tokens(items: list[str | list[int]]) -> int:
    """What the fake reports as ``usage.prompt_tokens``."""
    return sum(len(item) if isinstance(item, list) else len(tokens(item)) for item in items)


async def handle_embeddings(api_key: str | None, raw: bytes, headers: dict[str, str], send: Send) -> None:
    req = openai_request(api_key, raw, headers)
    if not isinstance(req, dict) or not isinstance(req.get("model"), str):
        raise _bad("you must provide a model parameter")
    if "input" not in req:
        raise _bad("you must provide an input parameter", "input")
    items = _inputs(req["input"])
    if any(not item for item in items):
        raise _bad(
            "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."
        )
    dimensions = req.get("dimensions", DEFAULT_DIMENSIONS)
    if not isinstance(dimensions, int) or dimensions < 1:
        raise _bad(f"Invalid value for 'dimensions' = {dimensions}. Must be greater than 0.", "dimensions")
    if dimensions > MAX_DIMENSIONS:  # as OpenAI refuses it (a fuzzed 2**31 once took this process's memory)
        raise _bad(f"Invalid value for 'dimensions' = {dimensions}. Must be at most {MAX_DIMENSIONS}.", "dimensions")
    encoding = req.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise _bad(f"Invalid value for 'encoding_format' = {encoding}.", "encoding_format")
    texts = " ".join(item for item in items if isinstance(item, str))
    latency = _LATENCY.search(texts)
    if latency:
        await asyncio.sleep(int(latency.group(1)) / 1000)
    failure = _FAIL.search(texts)
    if failure:
        raise openai_failure(int(failure.group(1)), f"fake upstream failure {failure.group(1)}")
    data = []
    for index, item in enumerate(items):
        values = vector(item, dimensions)
        embedding: Any = (
            base64.b64encode(struct.pack(f"<{dimensions}f", *values)).decode() if encoding == "base64" else values
        )
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    answer: dict[str, Any] = {"object": "list", "data": data, "model": req["model"]}
    if "[[no-usage]]" not in texts:
        count = prompt_tokens(items)
        answer["usage"] = {"prompt_tokens": count, "total_tokens": count}
    await _send_json(send, 200, answer)
