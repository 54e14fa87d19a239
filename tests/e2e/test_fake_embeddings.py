"""The fake upstream's embeddings are OpenAI's wire: the official openai SDK, pointed straight at the
fake, reads every shape it answers (floats, base64, its own decoding of the default) and its errors."""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterator

import openai
import pytest

from tests.support.fake_embeddings import vector
from tests.support.fake_upstream import FakeUpstream


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream() as f:
        yield f


@pytest.fixture
def client(fake: FakeUpstream) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=fake.base_url, api_key="upstream-secret", max_retries=0, timeout=10) as c:
        yield c


def test_floats_base64_and_the_sdk_default(client: openai.OpenAI):
    floats = client.embeddings.create(model="text-embedding-x", input=["a b c", "d"], encoding_format="float")
    assert floats.object == "list"
    assert floats.model == "text-embedding-x"
    assert [(d.object, d.index, len(d.embedding)) for d in floats.data] == [
        ("embedding", 0, 1536),
        ("embedding", 1, 1536),
    ]
    assert floats.data[0].embedding == vector("a b c", 1536)
    assert (floats.usage.prompt_tokens, floats.usage.total_tokens) == (4, 4)
    encoded = client.embeddings.create(model="text-embedding-x", input="a b c", encoding_format="base64", dimensions=8)
    raw = base64.b64decode(encoded.data[0].embedding)  # type: ignore[arg-type]
    assert list(struct.unpack("<8f", raw)) == pytest.approx(vector("a b c", 8), rel=1e-6)
    default = client.embeddings.create(model="text-embedding-x", input=[[1, 2], [3]], dimensions=16)
    assert default.data[1].embedding == pytest.approx(vector([3], 16), rel=1e-6)  # the SDK decoded its base64
    assert default.usage.prompt_tokens == 3


def test_errors_come_in_openai_s_shape(client: openai.OpenAI):
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="text-embedding-x", input=[])
    with pytest.raises(openai.BadRequestError, match="Must be at most 3072"):  # never made: gigabytes
        client.embeddings.create(model="text-embedding-x", input="x", dimensions=2**31)
    with pytest.raises(openai.InternalServerError):
        client.embeddings.create(model="text-embedding-x", input="x [[fail:503]]")
    with pytest.raises(openai.RateLimitError):
        client.embeddings.create(model="text-embedding-x", input="x [[fail:429]]")
    bad_key = openai.OpenAI(base_url=client.base_url, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad_key.embeddings.create(model="text-embedding-x", input="x")


def test_no_usage_on_demand(client: openai.OpenAI):
    answer = client.embeddings.with_raw_response.create(model="text-embedding-x", input="x [[no-usage]]")
    assert "usage" not in answer.http_response.json()
