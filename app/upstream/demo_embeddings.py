"""The demo upstream's embeddings: ``POST /embeddings`` answered in process, in OpenAI's wire shape.

Each input's vector is made from its text alone (a seeded generator, unit length), so the same input
always gets the same vector; ``dimensions`` sets its length (default 1,536, as OpenAI's
text-embedding-3-small), ``encoding_format: base64`` sends it as little-endian float32 bytes the
way OpenAI does. Tokens are counted as the demo's chat counts them: a word and the whitespace
after it is one token, a token array is its own count.
"""

from __future__ import annotations

import base64
import hashlib
import math
import random
import struct
from typing import Any

import msgspec

from app.upstream.demo_words import demo_tokens
from app.upstream.errors import error_from_status

DEFAULT_DIMENSIONS = 1536
#: The longest vector the demo makes (text-embedding-3-large's, the longest OpenAI offers): like
#: OpenAI, it refuses more (a vector is made whole in memory; 10**9 dimensions would be gigabytes).
MAX_DIMENSIONS = 3072


def _inputs(value: Any) -> list[str | list[int]]:
    """The request's ``input`` as a list of texts or token arrays."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(t, int) for t in value):
        return [value]
    return list(value) if isinstance(value, list) else []


def _vector(item: str | list[int], dimensions: int) -> list[float]:
    seed = hashlib.sha256(repr(item).encode()).digest()
    rng = random.Random(seed)
    values = [rng.uniform(-1.0, 1.0) for _ in range(dimensions)]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def embeddings_answer(body: dict[str, Any]) -> dict[str, Any]:
    """The answer to an embeddings request (already checked by the gateway's route)."""
    dimensions = body.get("dimensions") or DEFAULT_DIMENSIONS
    if dimensions > MAX_DIMENSIONS:
        refusal = {
            "error": {
                "message": f"Invalid value for 'dimensions' = {dimensions}. Must be at most {MAX_DIMENSIONS}.",
                "type": "invalid_request_error",
                "param": "dimensions",
                "code": None,
            }
        }
        raise error_from_status(400, msgspec.json.encode(refusal), None)
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    tokens = 0
    for index, item in enumerate(_inputs(body.get("input"))):
        tokens += len(item) if isinstance(item, list) else len(demo_tokens(item))
        vector = _vector(item, dimensions)
        embedding: Any = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode() if as_base64 else vector
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    return {
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
