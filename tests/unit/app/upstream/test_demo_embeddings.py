"""The demo upstream's embeddings make each vector whole in memory, in the gateway's process: a
``dimensions`` beyond the longest OpenAI offers is refused as OpenAI refuses it, never made (found by
the long fuzzing run, where 2**31 dimensions took a process's memory)."""

from __future__ import annotations

import pytest

from app.errors import GatewayError
from app.upstream.demo_embeddings import MAX_DIMENSIONS, embeddings_answer


def test_dimensions_beyond_the_longest_vector_are_a_400_naming_them():
    with pytest.raises(GatewayError) as refused:
        embeddings_answer({"model": "demo-embedding", "input": "hello", "dimensions": 2**31})
    assert refused.value.status == 400
    assert f"Must be at most {MAX_DIMENSIONS}" in refused.value.message


def test_the_longest_vector_is_still_made():
    answer = embeddings_answer({"model": "demo-embedding", "input": "hello", "dimensions": MAX_DIMENSIONS})
    assert len(answer["data"][0]["embedding"]) == MAX_DIMENSIONS
