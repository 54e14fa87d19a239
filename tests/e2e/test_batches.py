"""OpenAI's Files and Batch APIs through the gateway, with the official SDK: a batch is held as one
hold, polled to its end upstream (the fake, ``tests/support/fake_batches.py``), each line charged
from its own usage at the model's batch price — the figures worked out by hand below — and the rest
released; a bad line refuses the batch, naming it; a gateway killed mid-batch loses nothing."""

from __future__ import annotations

import io
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Team, Teams

#: batch-gpt: 2.5 and 10 USD per million input and output tokens, batches at half price; polled
#: every 0.2 s. At 100 credits per USD a token costs price × 100 micro-credits.
BATCH_MODEL = """batch_poll_seconds = 0.2

[[models]]
id = "batch-gpt"
display_name = "Batch GPT"
owned_by = "acme"
context_window = 8192
max_output_tokens = 1024
pricing = {{input = 2.5, output = 10, cache_create = 3.125, cache_hit = 1.25, batch_discount = 0.5}}
upstream = {{kind = "openai", base_url = "{base}", api_key_env = "UPSTREAM_KEY", model = "gpt-x"}}

[[models]]
id = "batch-claude"
display_name = "Batch Claude"
owned_by = "anthropic"
context_window = 8192
max_output_tokens = 1024
pricing = {{input = 3, output = 15, cache_create = 3.75, cache_hit = 0.3, batch_discount = 0.5}}
upstream = {{kind = "anthropic", base_url = "{root}", api_key_env = "UPSTREAM_KEY", model = "claude-x"}}
"""


def line(custom_id: str, words: int, model: str = "batch-gpt", **body: object) -> dict[str, object]:
    content = " ".join(["w"] * words)
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": content}], **body},
    }


def hand_cost(words: int) -> int:
    """What a line of ``words`` words costs at the batch price (1.25 and 5 USD per million): the fake
    counts a prompt as its words + 3 tokens, and answers ``Echo: <the words>``, words + 1 tokens."""
    prompt, completion = words + 3, words + 1
    return prompt * 125 + completion * 500  # 1.25 × 100 and 5 × 100 micro-credits a token


def upload(client: openai.OpenAI, lines: list[dict[str, object]]) -> str:
    data = "\n".join(json.dumps(item) for item in lines).encode() + b"\n"
    return client.files.create(file=("batch.jsonl", io.BytesIO(data)), purpose="batch").id


def wait_for(client: openai.OpenAI, batch_id: str, status: str, within: float = 30.0) -> openai.types.Batch:
    deadline = time.monotonic() + within
    while (batch := client.batches.retrieve(batch_id)).status != status:
        assert time.monotonic() < deadline, f"batch still {batch.status} after {within} s"
        time.sleep(0.1)
    return batch


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(api_key="upstream-secret") as fake:
        yield fake


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory, upstream: FakeUpstream) -> Path:
    return write_config(  # redis: two gateway processes share the ledger in the kill test
        tmp_path_factory.mktemp("batches"),
        upstream.base_url,
        redis=True,
        settings=BATCH_MODEL.format(base=upstream.base_url, root=upstream.anthropic_base_url),
    )


@pytest.fixture(scope="module")
def gateway(config: Path) -> Iterator[Gateway]:
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


def client_of(gateway: Gateway, team: Team) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0)


def line_charges(gateway: Gateway, team: Team, batch_id: str) -> dict[str, int]:
    return {
        row["request_id"].removeprefix(f"{batch_id}:"): -row["amount"]
        for row in gateway.charges(team.name)
        if row["request_id"].startswith(f"{batch_id}:")
    }


def test_a_batch_is_held_then_each_line_charged_at_the_batch_price(
    gateway: Gateway, team: Team, upstream: FakeUpstream
):
    upstream.batches.hold()
    client = client_of(gateway, team)
    words = {"first": 1, "second": 4, "third": 9}
    file_id = upload(client, [line(cid, n) for cid, n in words.items()])
    assert client.files.retrieve(file_id).purpose == "batch"
    batch = client.batches.create(
        input_file_id=file_id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"user": "alice"},
        extra_headers={"x-tollgate-tags": "project=offline"},
    )
    assert batch.status in ("validating", "in_progress")
    funds = plain_http.get(gateway.base_url + "/credits", headers={"Authorization": f"Bearer {team.key}"}).json()[
        "data"
    ]
    held = [h for h in funds["holds"] if h["id"] == batch.id]
    assert held, funds
    assert funds["held"] >= held[0]["credits"] > 0
    sent = [r for r in upstream.requests if r.path == "/v1/batches" and r.method == "POST"]
    assert sent  # the upstream got the batch, its lines renamed to the deployment's model
    upstream.batches.release()

    done = wait_for(client, batch.id, "completed")
    assert done.request_counts is not None
    assert done.request_counts.completed == 3
    charged = line_charges(gateway, team, batch.id)
    assert charged == {cid: hand_cost(n) for cid, n in words.items()}  # 2,500; 6,250; 12,500... by hand:
    assert charged["first"] == 4 * 125 + 2 * 500
    output = client.files.content(done.output_file_id).text.splitlines()
    assert [json.loads(o)["custom_id"] for o in output] == ["first", "second", "third"]
    assert json.loads(output[0])["response"]["body"]["model"] == "gpt-x"
    rows = [r for r in gateway.charges(team.name) if r["request_id"].startswith(batch.id)]
    assert {(r["endpoint"], r["tags"], r["end_user"]) for r in rows} == {("batches", "project=offline", "alice")}
    found = plain_http.get(
        f"{gateway.base_url}/requests/{batch.id}:second", headers={"Authorization": f"Bearer {team.key}"}
    ).json()
    assert found["data"]["cost_micros"] == hand_cost(4), found  # the request lookup finds a line
    gateway.wait_until_nothing_held(team.name)
    spent = plain_http.get(gateway.base_url + "/credits", headers={"Authorization": f"Bearer {team.key}"}).json()[
        "data"
    ]
    assert round(spent["total_usage"] * 1_000_000) == sum(charged.values())


def test_a_bad_line_refuses_the_batch_naming_it(gateway: Gateway, team: Team):
    client = client_of(gateway, team)
    file_id = upload(client, [line("ok", 2), line("too-long", 2, max_tokens=5000), line("later", 1)])
    with pytest.raises(openai.BadRequestError) as refused:
        client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    message = refused.value.body["message"]  # type: ignore[index]
    assert "Line 2" in message
    assert "too-long" in message
    assert "max_tokens" in message
    unknown = upload(client, [line("a", 1), line("b", 1, model="no-such-model")])
    with pytest.raises(openai.BadRequestError, match="Line 2"):
        client.batches.create(input_file_id=unknown, endpoint="/v1/chat/completions", completion_window="24h")
    named_badly = upload(client, [line("a", 1), line("b\x00c", 1)])  # a custom_id names the line's charge
    with pytest.raises(openai.BadRequestError, match=r"Line 2.*'custom_id' must not contain U\+0000"):
        client.batches.create(input_file_id=named_badly, endpoint="/v1/chat/completions", completion_window="24h")
    assert gateway.charges(team.name) == []
    gateway.wait_until_nothing_held(team.name)


def test_a_cancelled_batch_is_charged_for_what_it_completed(gateway: Gateway, team: Team, upstream: FakeUpstream):
    upstream.batches.hold()  # it never completes on its own: cancelled, it completed its first request
    client = client_of(gateway, team)
    words = {"done": 3, "not-done": 5, "never": 7}
    file_id = upload(client, [line(cid, n) for cid, n in words.items()])
    batch = client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    assert client.batches.cancel(batch.id).status == "cancelling"
    done = wait_for(client, batch.id, "cancelled")
    assert done.request_counts is not None
    assert done.request_counts.completed == 1
    assert line_charges(gateway, team, batch.id) == {"done": hand_cost(3)}  # 6 × 125 + 4 × 500 = 2,750
    assert hand_cost(3) == 2_750
    gateway.wait_until_nothing_held(team.name)


def test_a_batch_the_balance_cannot_cover_is_refused_with_402(gateway: Gateway, teams: Teams):
    poor = teams.open("0.001")  # 1,000 micro-credits: less than one line's worst case
    client = client_of(gateway, poor)
    file_id = upload(client, [line("a", 1)])
    with pytest.raises(openai.APIStatusError) as refused:
        client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    assert refused.value.status_code == 402
    assert client.batches.list().data == []  # nothing was created


def test_a_teams_files_are_its_own(gateway: Gateway, teams: Teams):
    owner, other = teams.open("10"), teams.open("10")
    file_id = upload(client_of(gateway, owner), [line("a", 1)])
    with pytest.raises(openai.NotFoundError):
        client_of(gateway, other).files.retrieve(file_id)
    with pytest.raises(openai.NotFoundError):
        client_of(gateway, other).batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
    assert client_of(gateway, owner).files.content(file_id).text.startswith('{"custom_id"')
    assert client_of(gateway, owner).files.delete(file_id).deleted
    with pytest.raises(openai.NotFoundError):
        client_of(gateway, owner).files.retrieve(file_id)


def test_a_gateway_killed_mid_batch_charges_every_line_once_after_restart(
    config: Path, gateway: Gateway, teams: Teams, upstream: FakeUpstream
):
    team = teams.open("100")
    upstream.batches.hold()
    words = {f"line-{i}": i + 1 for i in range(20)}
    batch_id = ""
    second = Gateway(config).start()
    try:
        client = client_of(second, team)
        batch_id = client.batches.create(
            input_file_id=upload(client, [line(cid, n) for cid, n in words.items()]),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        ).id
        assert second.process is not None
        time.sleep(1)  # five of its polls: the killed process holds the batch's turn, which must lapse
        os.kill(second.process.pid, signal.SIGKILL)
        second.process.wait()
        second.process = None
    finally:
        second.stop()
    upstream.batches.release()
    # the module's gateway (another process) takes the batch over once the killed one's turn lapses
    done = wait_for(client_of(gateway, team), batch_id, "completed")
    assert done.request_counts is not None
    assert line_charges(gateway, team, batch_id) == {cid: hand_cost(n) for cid, n in words.items()}
    gateway.wait_until_nothing_held(team.name)
    assert gateway.cli("ledger", "verify").returncode == 0


def message_request(custom_id: str, words: int, max_tokens: int = 50) -> dict[str, object]:
    content = " ".join(["w"] * words)
    return {
        "custom_id": custom_id,
        "params": {
            "model": "batch-claude",
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": content}],
        },
    }


def claude_cost(words: int) -> int:
    """A request of ``words`` words at batch-claude's batch price (1.5 and 7.5 USD per million): the
    fake counts its prompt as words + 3 tokens and answers ``Echo: <the words>``, words + 1 tokens."""
    return (words + 3) * 150 + (words + 1) * 750


def test_an_anthropic_message_batch_is_charged_line_by_line(gateway: Gateway, team: Team, upstream: FakeUpstream):
    upstream.batches.release()
    claude = anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0)
    words = {"a": 2, "b": 5, "c": 8}
    batch = claude.messages.batches.create(requests=[message_request(cid, n) for cid, n in words.items()])  # type: ignore[misc]
    assert batch.processing_status == "in_progress"
    deadline = time.monotonic() + 30
    while (batch := claude.messages.batches.retrieve(batch.id)).processing_status != "ended":
        assert time.monotonic() < deadline, batch
        time.sleep(0.1)
    assert batch.request_counts.succeeded == 3
    results = {r.custom_id: r.result for r in claude.messages.batches.results(batch.id)}
    assert {cid: r.type for cid, r in results.items()} == dict.fromkeys(words, "succeeded")
    assert line_charges(gateway, team, batch.id) == {cid: claude_cost(n) for cid, n in words.items()}
    assert claude_cost(2) == 5 * 150 + 3 * 750  # 3,000 micro-credits
    gateway.wait_until_nothing_held(team.name)


def test_a_bad_message_batch_request_is_named(gateway: Gateway, team: Team):
    claude = anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.batches.create(requests=[message_request("ok", 1), message_request("big", 1, 5000)])  # type: ignore[misc]
    assert "requests[1] (custom_id 'big')" in str(refused.value)
    assert gateway.charges(team.name) == []


def test_a_gateway_killed_while_charging_a_batch_leaves_every_line_charged_once(
    config: Path, gateway: Gateway, teams: Teams, upstream: FakeUpstream
):
    """Killed (``kill -9``) after it charged some of an ended batch's lines and before the rest: the
    other process settles it, charging each remaining line once and refusing none twice."""
    team = teams.open("100")
    upstream.batches.hold()
    words = {f"l{i}": 1 + i % 7 for i in range(1500)}
    second = Gateway(config).start()
    try:
        client = client_of(second, team)
        batch_id = client.batches.create(
            input_file_id=upload(client, [line(cid, n) for cid, n in words.items()]),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        ).id
        holds = lambda: {  # noqa: E731 - the batch's hold as the killed process's /v1/credits shows it
            h["id"]: h["credits"]
            for h in plain_http.get(
                second.base_url + "/credits", headers={"Authorization": f"Bearer {team.key}"}
            ).json()["data"]["holds"]
        }
        time.sleep(1)  # the second process holds the batch's polling turn
        first_hold = holds()[batch_id]
        upstream.batches.release()
        deadline = time.monotonic() + 30
        while (left := holds().get(batch_id)) == first_hold:
            assert time.monotonic() < deadline, "the batch was never charged"
            time.sleep(0.01)
        assert left is not None, "settled before the kill: nothing was cut off"
        assert second.process is not None
        os.kill(second.process.pid, signal.SIGKILL)
        second.process.wait()
        second.process = None
    finally:
        second.stop()
    done = wait_for(client_of(gateway, team), batch_id, "completed", within=60)
    assert done.request_counts is not None
    rows = [r for r in gateway.charges(team.name) if r["request_id"].startswith(f"{batch_id}:")]
    assert sorted(r["request_id"] for r in rows) == sorted(f"{batch_id}:{cid}" for cid in words)  # each once
    assert sum(-r["amount"] for r in rows) == sum(hand_cost(n) for n in words.values())
    gateway.wait_until_nothing_held(team.name)
    assert gateway.cli("ledger", "verify").returncode == 0


def _multipart(*parts: tuple[str, str | None, bytes]) -> tuple[bytes, str]:
    """A multipart body of ``(name, filename, content)`` parts, framed by hand: what the SDK would
    never send (a second ``file`` part, a file name holding NUL)."""
    body = b""
    for name, filename, content in parts:
        named = f'; filename="{filename}"' if filename is not None else ""
        body += f'--b0\r\nContent-Disposition: form-data; name="{name}"{named}\r\n\r\n'.encode() + content + b"\r\n"
    return body + b"--b0--\r\n", "multipart/form-data; boundary=b0"


@pytest.mark.parametrize(
    ("parts", "says"),
    [
        pytest.param(
            [("purpose", None, b"batch"), ("file", "in\x00put.jsonl", b"{}\n")], "NUL", id="nul-in-the-file-name"
        ),
        pytest.param(
            [("purpose", None, b"batch"), ("file", "in\u202eput.jsonl", b"{}\n")],
            "bidirectional",
            id="bidi-control-in-the-file-name",
        ),
        pytest.param(
            [("purpose", None, b"batch"), ("file", "a.jsonl", b"{}\n"), ("file", "a.jsonl", b"{}\n")],
            "more than one 'file' part",
            id="two-file-parts",
        ),
    ],
)
def test_an_upload_the_files_table_could_not_keep_is_a_400_and_stores_nothing(
    gateway: Gateway, team: Team, parts: list[tuple[str, str | None, bytes]], says: str
):
    """Found by the long fuzzing run on PostgreSQL: a NUL in the file name (PostgreSQL's text cannot
    hold it) and a second ``file`` part (stored under the upload's one id twice) were 500s."""
    body, content_type = _multipart(*parts)
    with plain_http.Client(timeout=30) as http:
        answer = http.post(
            f"{gateway.base_url}/files",
            content=body,
            headers={"authorization": f"Bearer {team.key}", "content-type": content_type},
        )
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert error["param"] == "file"
        assert says in error["message"]
        listed = http.get(f"{gateway.base_url}/files", headers={"authorization": f"Bearer {team.key}"})
        assert listed.json()["data"] == []
