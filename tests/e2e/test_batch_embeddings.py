"""Batches of ``/v1/embeddings`` through the official SDK: each line checked as the same embeddings
request alone (its model serving embeddings, allowed for the key, each input within the context
window), held at the batch price for its counted inputs, and charged from its own output line's
``usage.prompt_tokens`` at the batch price — figures worked out by hand below."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from tests.e2e.test_batches import BATCH_MODEL, client_of, line, line_charges, upload, wait_for
from tests.support.embeddings_models import DEPLOYED, embeddings_model
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Team, Teams

#: 0.2 USD per million input tokens, half in batches: 0.1 USD = 10 micro-credits a token (100 credits a USD).
PRICING = "{input = 0.2, batch_discount = 0.5}"
EMBEDDINGS = "/v1/embeddings"


def embedding_line(
    custom_id: str, given: str | list[str] | list[int], model: str = "fake-embedding"
) -> dict[str, object]:
    return {"custom_id": custom_id, "method": "POST", "url": EMBEDDINGS, "body": {"model": model, "input": given}}


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(api_key="upstream-secret") as fake:
        yield fake


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, upstream: FakeUpstream) -> Iterator[Gateway]:
    settings = BATCH_MODEL.format(base=upstream.base_url, root=upstream.anthropic_base_url)
    config = write_config(
        tmp_path_factory.mktemp("batch-embeddings"),
        upstream.base_url,
        settings=settings + embeddings_model(upstream.base_url, PRICING),
    )
    gw = Gateway(config).start()
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    t = Teams(gateway.config)
    yield t
    t.close()


@pytest.fixture
def team(teams: Teams) -> Team:
    return teams.open("100")


def test_each_embeddings_line_is_charged_from_its_usage_at_the_batch_price(
    gateway: Gateway, team: Team, upstream: FakeUpstream
):
    upstream.batches.release()
    client = client_of(gateway, team)
    lines = [
        embedding_line("text", "the quick brown fox jumps"),  # the fake counts 5 tokens
        embedding_line("texts", ["alpha beta", "gamma"]),  # 2 + 1
        embedding_line("tokens", [101, 102, 103, 104, 105, 106, 107]),  # a token array: its length, 7
    ]
    batch = client.batches.create(input_file_id=upload(client, lines), endpoint=EMBEDDINGS, completion_window="24h")
    assert batch.endpoint == EMBEDDINGS
    sent = next(f for f in upstream.batches.files.values() if f.filename == f"{batch.id}.jsonl")
    assert {json.loads(s)["body"]["model"] for s in sent.content.splitlines()} == {DEPLOYED}  # renamed
    done = wait_for(client, batch.id, "completed")
    assert done.request_counts is not None
    assert done.request_counts.completed == 3
    assert done.output_file_id is not None
    output = {
        o["custom_id"]: o["response"]["body"]
        for o in map(json.loads, client.files.content(done.output_file_id).text.splitlines())
    }
    assert [len(d["embedding"]) for d in output["texts"]["data"]] == [1536, 1536]
    assert {cid: body["usage"]["prompt_tokens"] for cid, body in output.items()} == {"text": 5, "texts": 3, "tokens": 7}
    # 10 micro-credits an input token: 5 × 10, 3 × 10, 7 × 10; an embedding has no output tokens
    assert line_charges(gateway, team, batch.id) == {"text": 50, "texts": 30, "tokens": 70}
    rows = [r for r in gateway.charges(team.name) if r["request_id"].startswith(batch.id)]
    assert {r["model"] for r in rows} == {"fake-embedding"}
    gateway.wait_until_nothing_held(team.name)
    assert gateway.cli("ledger", "verify").returncode == 0


def refused(client: openai.OpenAI, lines: list[dict[str, object]], endpoint: str = EMBEDDINGS) -> str:
    with pytest.raises((openai.BadRequestError, openai.NotFoundError, openai.PermissionDeniedError)) as caught:
        client.batches.create(input_file_id=upload(client, lines), endpoint=endpoint, completion_window="24h")  # type: ignore[arg-type]
    assert isinstance(caught.value.body, dict)
    return str(caught.value.body["message"])


def test_an_embeddings_line_is_checked_as_the_request_alone(gateway: Gateway, team: Team):
    client = client_of(gateway, team)
    chat_model = refused(client, [embedding_line("a", "hello"), embedding_line("b", "hello", model="batch-gpt")])
    assert "Line 2" in chat_model
    assert "embeddings" in chat_model  # batch-gpt does not serve /v1/embeddings
    long_input = refused(client, [embedding_line("long", [1] * 9000)])  # fake-embedding takes 8,191 tokens
    assert "Line 1 of the input file (custom_id 'long')" in long_input
    assert "8191" in long_input
    empty = refused(client, [embedding_line("empty", [])])
    assert "input" in empty
    wrong_url = refused(client, [line("chat", 2)])  # a chat line in a batch of embeddings
    assert "'url' must be the batch's endpoint, /v1/embeddings" in wrong_url
    other_way = refused(client, [embedding_line("e", "hi")], endpoint="/v1/chat/completions")
    assert "/v1/chat/completions" in other_way
    assert gateway.charges(team.name) == []
    gateway.wait_until_nothing_held(team.name)


def test_an_embeddings_line_must_be_allowed_for_the_key(gateway: Gateway, team: Team):
    created = gateway.cli("key", "create", "--team", team.name, "--models", "batch-gpt").stdout
    gpt_only = openai.OpenAI(base_url=gateway.base_url, api_key=created.splitlines()[-1], max_retries=0)
    with gpt_only:
        message = refused(gpt_only, [embedding_line("e", "some words")])
    assert "Line 1" in message
    assert "fake-embedding" in message
    assert gateway.charges(team.name) == []
