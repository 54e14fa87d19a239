"""Idempotency-Keys on making files and batches, through the official SDKs: a create retried under
the same key makes nothing again — no second file, no second upstream batch, no second hold — and
gets the first answer back (``idempotent-replayed: true``); the key used for another request is a
409; a retry while the key's batch is still being made is a 409 the SDK retries until the answer is
there. The batch made once is charged once, line by line, as any other."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anthropic
import openai
import pytest

from tests.e2e.test_batches import (
    BATCH_MODEL,
    claude_cost,
    client_of,
    hand_cost,
    line,
    line_charges,
    message_request,
    upload,
    wait_for,
)
from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Team, Teams

CREATE = {"endpoint": "/v1/chat/completions", "completion_window": "24h"}


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(api_key="upstream-secret") as fake:
        yield fake


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, upstream: FakeUpstream) -> Iterator[Gateway]:
    config: Path = write_config(
        tmp_path_factory.mktemp("batch-keys"),
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


def upstream_calls(upstream: FakeUpstream, path: str) -> int:
    return sum(1 for r in upstream.requests if r.method == "POST" and r.path == path)


def until(done: Callable[[], bool], within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not done():
        assert time.monotonic() < deadline, f"not so after {within} s"
        time.sleep(0.02)


def holds(gateway: Gateway, team: Team) -> dict[str, float]:
    funds = plain_http.get(gateway.base_url + "/credits", headers={"Authorization": f"Bearer {team.key}"}).json()[
        "data"
    ]
    return {h["id"]: h["credits"] for h in funds["holds"]}


def test_a_file_uploaded_again_under_its_key_is_stored_once(gateway: Gateway, team: Team):
    client = client_of(gateway, team)
    data = b'{"custom_id": "a"}\n'
    key = {"Idempotency-Key": "upload-1"}
    first = client.files.create(file=("batch.jsonl", io.BytesIO(data)), purpose="batch", extra_headers=key)
    again = client.files.with_raw_response.create(
        file=("batch.jsonl", io.BytesIO(data)), purpose="batch", extra_headers=key
    )
    assert again.headers["idempotent-replayed"] == "true"
    assert again.parse() == first
    assert [f.id for f in client.files.list().data] == [first.id]
    with pytest.raises(openai.ConflictError, match="different request"):  # the key, for other bytes
        client.files.create(file=("batch.jsonl", io.BytesIO(data + data)), purpose="batch", extra_headers=key)
    with pytest.raises(openai.ConflictError):  # or another name
        client.files.create(file=("other.jsonl", io.BytesIO(data)), purpose="batch", extra_headers=key)
    assert [f.id for f in client.files.list().data] == [first.id]
    assert client.files.content(first.id).content == data
    second = client.files.create(file=("batch.jsonl", io.BytesIO(data)), purpose="batch")  # no key: a new file
    assert second.id != first.id


def test_uploads_racing_under_one_key_store_one_file(gateway: Gateway, team: Team):
    """Four uploads of the same file under one key at once: whichever is stored first is the answer
    every one gets; the others' copies are dropped."""
    client = client_of(gateway, team)
    data = b'{"custom_id": "raced"}\n' * 20_000  # 460 kB: the uploads overlap
    key = {"Idempotency-Key": "raced-upload"}
    answers: list[str] = []

    def send() -> None:
        made = client.files.create(file=("raced.jsonl", io.BytesIO(data)), purpose="batch", extra_headers=key)
        answers.append(made.id)

    senders = [threading.Thread(target=send) for _ in range(4)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    assert len(answers) == 4
    assert len(set(answers)) == 1
    assert [f.id for f in client.files.list().data] == answers[:1]
    assert client.files.content(answers[0]).content == data


def test_a_batch_created_again_under_its_key_is_made_and_held_once(
    gateway: Gateway, team: Team, upstream: FakeUpstream
):
    upstream.batches.hold()
    client = client_of(gateway, team)
    file_id = upload(client, [line("one", 2), line("two", 6)])
    before = upstream_calls(upstream, "/v1/batches")
    key = {"Idempotency-Key": "nightly-2026-11-28"}
    first = client.batches.create(input_file_id=file_id, extra_headers=key, **CREATE)  # type: ignore[arg-type]
    again = client.batches.with_raw_response.create(input_file_id=file_id, extra_headers=key, **CREATE)  # type: ignore[arg-type]
    assert again.headers["idempotent-replayed"] == "true"
    assert again.parse() == first  # the first answer, as it was sent
    assert upstream_calls(upstream, "/v1/batches") == before + 1
    assert list(holds(gateway, team)) == [first.id]
    assert [b.id for b in client.batches.list().data] == [first.id]
    with pytest.raises(openai.ConflictError, match="different request"):
        client.batches.create(input_file_id=file_id, metadata={"run": "2"}, extra_headers=key, **CREATE)  # type: ignore[arg-type]

    upstream.batches.release()
    wait_for(client, first.id, "completed")
    replayed = client.batches.create(input_file_id=file_id, extra_headers=key, **CREATE)  # type: ignore[arg-type]
    assert replayed == first  # still the first answer; nothing made
    assert upstream_calls(upstream, "/v1/batches") == before + 1
    # one 2-word and one 6-word line at the batch price: 5 × 125 + 3 × 500 and 9 × 125 + 7 × 500
    assert line_charges(gateway, team, first.id) == {"one": 2_125, "two": 4_625}
    assert hand_cost(2) == 2_125
    gateway.wait_until_nothing_held(team.name)
    assert gateway.cli("ledger", "verify").returncode == 0


def test_a_retry_while_the_keys_batch_is_being_made_gets_its_answer(
    gateway: Gateway, team: Team, upstream: FakeUpstream
):
    """The first attempt's upstream takes 1.5 s to create the batch; the retry sent meanwhile is told
    409 (retry) and, retried by the SDK, gets the first attempt's answer."""
    upstream.batches.release()
    upstream.batches.create_seconds = 1.5
    try:
        client = client_of(gateway, team)
        file_id = upload(client, [line("only", 3)])
        before = upstream_calls(upstream, "/v1/batches")
        key = {"Idempotency-Key": "retried"}
        made: list[openai.types.Batch] = []
        first = threading.Thread(
            target=lambda: made.append(client.batches.create(input_file_id=file_id, extra_headers=key, **CREATE))  # type: ignore[arg-type]
        )
        first.start()
        with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=5) as patient:
            until(lambda: upstream_calls(upstream, "/v1/batches") > before)  # the first attempt is upstream
            retried = patient.batches.with_raw_response.create(input_file_id=file_id, extra_headers=key, **CREATE)  # type: ignore[arg-type]
        first.join()
    finally:
        upstream.batches.create_seconds = 0.0
    assert retried.retries_taken >= 1  # told 409 while the first was being made
    assert retried.headers["idempotent-replayed"] == "true"
    assert retried.parse() == made[0]
    assert upstream_calls(upstream, "/v1/batches") == before + 1
    wait_for(client, made[0].id, "completed")
    assert line_charges(gateway, team, made[0].id) == {"only": 6 * 125 + 4 * 500}
    gateway.wait_until_nothing_held(team.name)


def test_a_message_batch_created_again_under_its_key_is_made_once(gateway: Gateway, team: Team, upstream: FakeUpstream):
    upstream.batches.hold()
    claude = anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0)
    requests = [message_request("x", 2), message_request("y", 4)]
    before = upstream_calls(upstream, "/v1/messages/batches")
    key = {"Idempotency-Key": "claude-run"}
    first = claude.messages.batches.create(requests=requests, extra_headers=key)  # type: ignore[arg-type]
    again = claude.messages.batches.with_raw_response.create(requests=requests, extra_headers=key)  # type: ignore[arg-type]
    assert again.headers["idempotent-replayed"] == "true"
    assert again.parse() == first
    assert json.loads(again.http_response.content)["id"] == first.id
    assert upstream_calls(upstream, "/v1/messages/batches") == before + 1
    assert list(holds(gateway, team)) == [first.id]
    with pytest.raises(anthropic.ConflictError):
        claude.messages.batches.create(requests=requests[:1], extra_headers=key)  # type: ignore[arg-type]
    upstream.batches.release()
    until(lambda: claude.messages.batches.retrieve(first.id).processing_status == "ended")
    # 2 and 4 words at batch-claude's batch price: 5 × 150 + 3 × 750 and 7 × 150 + 5 × 750
    assert line_charges(gateway, team, first.id) == {"x": 3_000, "y": 4_800}
    assert claude_cost(4) == 4_800
    gateway.wait_until_nothing_held(team.name)
