"""A batch that ends without running all its requests — OpenAI's ``expired``, Anthropic's cancelled or
expired — is charged for each request it completed, exactly, and nothing for the rest; its hold is
released and ``ledger verify`` finds every charge sound. The fake upstream ends them in the
providers' own shapes (``tests/support/fake_batches.py``, ``fake_message_batches.py``): OpenAI's
completed lines in the output file and the rest in the error file as ``batch_expired``; Anthropic's
results with ``succeeded``, ``canceled`` and ``expired`` entries and their counts."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import anthropic
import pytest

from tests.e2e.test_batches import BATCH_MODEL, client_of, line, line_charges, message_request, upload, wait_for
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Team, Teams


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(api_key="upstream-secret") as fake:
        yield fake


@pytest.fixture(autouse=True)
def ends_as_usual(upstream: FakeUpstream) -> Iterator[None]:
    yield
    upstream.batches.expires_with = None
    upstream.batches.done_before_cancel = 1
    upstream.batches.release()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, upstream: FakeUpstream) -> Iterator[Gateway]:
    config = write_config(
        tmp_path_factory.mktemp("batch-endings"),
        upstream.base_url,
        settings=BATCH_MODEL.format(base=upstream.base_url, root=upstream.anthropic_base_url),
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


def ended(claude: anthropic.Anthropic, batch_id: str, within: float = 30.0) -> anthropic.types.messages.MessageBatch:
    deadline = time.monotonic() + within
    while (batch := claude.messages.batches.retrieve(batch_id)).processing_status != "ended":
        assert time.monotonic() < deadline, batch
        time.sleep(0.1)
    return batch


def test_an_expired_openai_batch_is_charged_for_what_it_completed(gateway: Gateway, team: Team, upstream: FakeUpstream):
    upstream.batches.expires_with = 2  # the window closed after two of the four requests ran
    upstream.batches.release()
    client = client_of(gateway, team)
    words = {"early": 1, "on-time": 5, "late": 8, "later": 13}
    batch = client.batches.create(
        input_file_id=upload(client, [line(cid, n) for cid, n in words.items()]),
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    done = wait_for(client, batch.id, "expired")
    assert done.expired_at is not None
    assert done.request_counts is not None
    assert (done.request_counts.completed, done.request_counts.failed) == (2, 2)
    assert done.output_file_id is not None
    assert done.error_file_id is not None
    output = [json.loads(o) for o in client.files.content(done.output_file_id).text.splitlines()]
    assert [o["custom_id"] for o in output] == ["early", "on-time"]
    errors = [json.loads(e) for e in client.files.content(done.error_file_id).text.splitlines()]
    assert [(e["custom_id"], e["response"], e["error"]["code"]) for e in errors] == [
        ("late", None, "batch_expired"),
        ("later", None, "batch_expired"),
    ]
    # batch-gpt's batch price: 1.25 and 5 USD per million = 125 and 500 micro-credits a token; the fake
    # counts a prompt of n words as n + 3 tokens and answers n + 1: 1 word 4 × 125 + 2 × 500 = 1,500;
    # 5 words 8 × 125 + 6 × 500 = 4,000. The two requests that never ran cost nothing.
    assert line_charges(gateway, team, batch.id) == {"early": 1_500, "on-time": 4_000}
    gateway.wait_until_nothing_held(team.name)
    assert gateway.cli("ledger", "verify").returncode == 0


def test_a_cancelled_openai_batch_lists_what_it_never_ran_as_errors(
    gateway: Gateway, team: Team, upstream: FakeUpstream
):
    upstream.batches.hold()
    upstream.batches.done_before_cancel = 1
    client = client_of(gateway, team)
    batch = client.batches.create(
        input_file_id=upload(client, [line("ran", 2), line("never", 3)]),
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    client.batches.cancel(batch.id)
    done = wait_for(client, batch.id, "cancelled")
    assert done.error_file_id is not None
    errors = [json.loads(e) for e in client.files.content(done.error_file_id).text.splitlines()]
    assert [(e["custom_id"], e["error"]["code"]) for e in errors] == [("never", "batch_cancelled")]
    assert line_charges(gateway, team, batch.id) == {"ran": 5 * 125 + 3 * 500}  # 2,125
    gateway.wait_until_nothing_held(team.name)


def test_a_cancelled_anthropic_batch_is_charged_for_what_it_completed(
    gateway: Gateway, team: Team, upstream: FakeUpstream
):
    upstream.batches.hold()  # it never ends on its own; cancelled, it had answered two of four
    upstream.batches.done_before_cancel = 2
    claude = anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0)
    words = {"a": 1, "b": 3, "c": 6, "d": 10}
    batch = claude.messages.batches.create(requests=[message_request(cid, n) for cid, n in words.items()])  # type: ignore[misc]
    cancelling = claude.messages.batches.cancel(batch.id)
    assert cancelling.processing_status == "canceling"
    done = ended(claude, batch.id)
    counts = done.request_counts
    assert (counts.succeeded, counts.canceled, counts.errored, counts.expired, counts.processing) == (2, 2, 0, 0, 0)
    assert done.cancel_initiated_at is not None
    results = {r.custom_id: r.result.type for r in claude.messages.batches.results(batch.id)}
    assert results == {"a": "succeeded", "b": "succeeded", "c": "canceled", "d": "canceled"}
    # batch-claude's batch price: 1.5 and 7.5 USD per million = 150 and 750 micro-credits a token;
    # 1 word: 4 × 150 + 2 × 750 = 2,100; 3 words: 6 × 150 + 4 × 750 = 3,900. Canceled: nothing.
    assert line_charges(gateway, team, batch.id) == {"a": 2_100, "b": 3_900}
    gateway.wait_until_nothing_held(team.name)
    assert gateway.cli("ledger", "verify").returncode == 0


def test_an_expired_anthropic_batch_is_charged_for_what_it_completed(
    gateway: Gateway, team: Team, upstream: FakeUpstream
):
    upstream.batches.expires_with = 1
    upstream.batches.release()
    claude = anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0)
    batch = claude.messages.batches.create(
        requests=[message_request("first", 4), message_request("second", 2), message_request("third", 9)]  # type: ignore[list-item]
    )
    done = ended(claude, batch.id)
    assert (done.request_counts.succeeded, done.request_counts.expired) == (1, 2)
    results = {r.custom_id: r.result.type for r in claude.messages.batches.results(batch.id)}
    assert results == {"first": "succeeded", "second": "expired", "third": "expired"}
    assert line_charges(gateway, team, batch.id) == {"first": 7 * 150 + 5 * 750}  # 4,800
    gateway.wait_until_nothing_held(team.name)
    assert gateway.cli("ledger", "verify").returncode == 0
