"""Limits against abuse on streams, through real sockets: how many may be open per API key (across
gateway processes sharing Redis) and per process — refused with 429 and ``retry-after`` before
anything is held — and a client that stops reading, cut off after ``write_timeout`` and billed for
what was sent."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from decimal import Decimal

import httpx
import pytest

from app.errors import RateLimited
from app.ratelimit import streams as stream_slots
from app.ratelimit.streams import StreamSlots
from app.tokens.encoding import count_o200k
from tests.support import plain_http
from tests.support.backend import REDIS_URL
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.raw_http import connect, head
from tests.support.teams import Team, Teams

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

LIMITS = "max_streams_per_key = 2\nmax_streams = 3\nwrite_timeout = 1\n"


def held_at(gate: str) -> str:
    """A message the fake answers only once the test opens ``gate``: its stream holds its slot meanwhile,
    however slow the machine (a fixed latency raced the test's own checks under load)."""
    return f"hold on [[gate:{gate}]]"


def new_gate(name: str) -> str:
    return f"{name}-{time.time_ns()}"


@pytest.fixture(scope="module")
def streaming(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    gw = Gateway(write_config(tmp_path_factory.mktemp("streams"), fake_upstream.base_url, settings=LIMITS)).start()
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def stream_teams(streaming: Gateway) -> Iterator[Teams]:
    t = Teams(streaming.config)
    yield t
    t.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[list[Gateway]]:
    """Two gateway processes on one ledger, sharing their limits through Redis."""
    config = write_config(
        tmp_path_factory.mktemp("shared-streams"), fake_upstream.base_url, redis=True, settings=LIMITS
    )
    gateways = [Gateway(config).start() for _ in range(2)]
    yield gateways
    for gw in gateways:
        gw.stop()


def chat(gateway: Gateway, team: Team, text: str, *, stream: bool = True) -> tuple[str, dict, dict]:
    return (
        gateway.base_url + "/chat/completions",
        {"model": "fake-gpt", "stream": stream, "messages": [{"role": "user", "content": text}]},
        {"authorization": f"Bearer {team.key}"},
    )


def messages(gateway: Gateway, team: Team, text: str) -> tuple[str, dict, dict]:
    return (
        gateway.root_url + "/v1/messages",
        {"model": "fake-claude", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": text}]},
        {"x-api-key": team.key, "anthropic-version": "2023-06-01"},
    )


async def post(http: httpx.AsyncClient, request: tuple[str, dict, dict]) -> httpx.Response:
    url, body, headers = request
    return await http.post(url, json=body, headers=headers)


async def open_slowly(
    http: httpx.AsyncClient, fake: FakeUpstream, requests: list[tuple[str, dict, dict]]
) -> list[asyncio.Task[httpx.Response]]:
    """Start streams the fake holds at a gate, and return once the fake has them all (each took
    its slot before it was sent upstream)."""
    seen = len(fake.requests)
    tasks = [asyncio.create_task(post(http, r)) for r in requests]
    deadline = time.monotonic() + 10
    while len(fake.requests) < seen + len(requests):
        assert time.monotonic() < deadline, "the streams never reached the upstream"
        await asyncio.sleep(0.02)
    return tasks


def assert_refused_for_streams(reply: httpx.Response, whose: str) -> None:
    assert reply.status_code == 429
    assert reply.headers["retry-after"] == "1"
    assert reply.headers["x-should-retry"] == "true"
    body = reply.json()
    if "type" in body:  # the Messages shape
        assert body["type"] == "error"
        assert body["error"]["type"] == "rate_limit_error"
        message = body["error"]["message"]
    else:
        assert body["error"]["type"] == "rate_limit_error"
        assert set(body["error"]) == {"message", "type", "param", "code"}
        message = body["error"]["message"]
    assert whose in message


async def test_a_key_with_its_streams_open_gets_429_until_one_ends(
    streaming: Gateway, stream_teams: Teams, fake_upstream: FakeUpstream
):
    team = stream_teams.open("100")
    async with plain_http.AsyncClient(timeout=30) as http:
        gate = new_gate("key-streams")
        running = await open_slowly(
            http, fake_upstream, [chat(streaming, team, held_at(gate)), messages(streaming, team, held_at(gate))]
        )
        try:
            before = streaming.cli("team", "show", team.name).stdout  # the two streams' holds
            sent = len(fake_upstream.requests)
            refused = await post(http, chat(streaming, team, "one more"))
            assert_refused_for_streams(refused, "This API key has 2 streams")
            assert_refused_for_streams(await post(http, messages(streaming, team, "one more")), "This API key")
            assert len(fake_upstream.requests) == sent  # refused before the upstream, and before any hold:
            assert streaming.cli("team", "show", team.name).stdout == before
            plain = await post(http, chat(streaming, team, "not a stream", stream=False))
            assert plain.status_code == 200  # the limit counts streams only
        finally:
            fake_upstream.open_gate(gate)
        assert [reply.status_code for reply in await asyncio.gather(*running)] == [200] * len(running)
        again = await post(http, chat(streaming, team, "once they ended"))
        assert again.status_code == 200
        assert "Echo" in again.text
    streaming.wait_until_nothing_held(team.name)
    assert len(streaming.charges(team.name)) == 4  # the two slow streams, the plain request, the last stream


async def test_a_process_serving_its_limit_of_streams_refuses_any_key(
    streaming: Gateway, stream_teams: Teams, fake_upstream: FakeUpstream
):
    first, second = stream_teams.open("100"), stream_teams.open("100")
    async with plain_http.AsyncClient(timeout=30) as http:
        gate = new_gate("process-streams")
        running = await open_slowly(
            http,
            fake_upstream,
            [
                chat(streaming, first, held_at(gate)),
                chat(streaming, first, held_at(gate)),
                messages(streaming, second, held_at(gate)),
            ],
        )
        try:
            assert_refused_for_streams(await post(http, chat(streaming, second, "a fourth")), "This gateway process")
            assert_refused_for_streams(await post(http, messages(streaming, second, "a fourth")), "concurrent streams")
        finally:
            fake_upstream.open_gate(gate)
        assert [reply.status_code for reply in await asyncio.gather(*running)] == [200] * len(running)
    for team, streams in ((first, 2), (second, 1)):
        streaming.wait_until_nothing_held(team.name)
        assert len(streaming.charges(team.name)) == streams


async def test_a_key_s_limit_holds_across_processes_sharing_redis(shared: list[Gateway], fake_upstream: FakeUpstream):
    one, other = shared
    teams = Teams(one.config)
    try:
        team = teams.open("100")
    finally:
        teams.close()
    async with plain_http.AsyncClient(timeout=30) as http:
        gate = new_gate("shared-streams")
        running = await open_slowly(
            http, fake_upstream, [chat(one, team, held_at(gate)), chat(one, team, held_at(gate))]
        )
        try:
            assert_refused_for_streams(await post(http, chat(other, team, "elsewhere")), "This API key has 2 streams")
            assert_refused_for_streams(await post(http, messages(other, team, "elsewhere")), "This API key")
        finally:
            fake_upstream.open_gate(gate)
        assert [reply.status_code for reply in await asyncio.gather(*running)] == [200] * len(running)
        for _ in range(5):  # a stream's slot is free, in every process, as soon as the stream has ended
            rounds = await asyncio.gather(post(http, chat(one, team, "next")), post(http, chat(other, team, "next")))
            assert [reply.status_code for reply in rounds] == [200, 200]
    one.wait_until_nothing_held(team.name)
    assert len(one.charges(team.name)) == 12


async def test_the_slots_of_a_process_that_died_expire_and_live_ones_are_renewed(monkeypatch):
    monkeypatch.setattr(stream_slots, "SLOT_TTL", 1.0)
    monkeypatch.setattr(stream_slots, "RENEW_EVERY", 0.25)
    namespace = f"test-{time.time_ns()}"
    live = StreamSlots(1, 10, REDIS_URL, namespace)
    dead = StreamSlots(1, 10, REDIS_URL, namespace)
    other = StreamSlots(1, 10, REDIS_URL, namespace)
    try:
        await dead.take("key-a")
        dead._renewer.cancel()  # the process died: nobody renews its slot, nobody gives it back
        await live.take("key-b")
        with pytest.raises(RateLimited):
            await other.take("key-a")
        await asyncio.sleep(1.5)
        await (await other.take("key-a")).release()  # the dead process's slot expired
        with pytest.raises(RateLimited):
            await other.take("key-b")  # the live one was renewed
    finally:
        for slots in (live, dead, other):  # dead too: its Redis connection, left to the collector, is a ResourceWarning
            await slots.aclose()


# A client that stops reading

WORDS = 80_000


def _text_in(frames: bytes) -> str:
    """The text deltas in what the client received (chat chunks or Messages events)."""
    text = []
    for line in frames.split(b"\n"):
        if not line.startswith(b"data: {"):
            continue
        try:
            event = json.loads(line[6:])
        except json.JSONDecodeError:
            continue  # cut off in the middle
        for choice in event.get("choices") or ():
            text.append(choice.get("delta", {}).get("content") or "")
        if event.get("type") == "content_block_delta":
            text.append(event["delta"].get("text", ""))
    return "".join(text)


@pytest.mark.parametrize("endpoint", ["chat", "messages"])
def test_a_client_that_stops_reading_is_cut_off_and_billed_for_what_was_sent(
    streaming: Gateway, stream_teams: Teams, endpoint
):
    team = stream_teams.open("100")
    words = " ".join(f"w{i}" for i in range(WORDS))  # echoed back: ~20 MB of frames, more than buffers hold
    if endpoint == "chat":
        path, headers = "/v1/chat/completions", {"authorization": f"Bearer {team.key}"}
        body = {"model": "agent-gpt", "stream": True, "messages": [{"role": "user", "content": words}]}
    else:
        path, headers = "/v1/messages", {"x-api-key": team.key, "anthropic-version": "2023-06-01"}
        body = {
            "model": "agent-claude",
            "max_tokens": 128000,
            "stream": True,
            "messages": [{"role": "user", "content": words}],
        }
    request = head("POST", path, {**headers, "content-type": "application/json"}, json.dumps(body).encode())
    # the answer's head waits on an 80,000-word prompt counted and sent upstream: seconds, on a loaded machine
    with connect(streaming.port, receive_buffer=4096, timeout=60) as sock:
        sock.sendall(request)
        received = sock.recv(4096)
        assert received.startswith(b"HTTP/1.1 200")
        shown = streaming.wait_until_nothing_held(team.name, within=30)  # it stops reading: the gateway gives up
        try:
            while chunk := sock.recv(65536):  # what reached the client before the cut
                received += chunk
        except ConnectionResetError:
            pass
    (charge,) = streaming.charges(team.name)
    delivered, whole = count_o200k(_text_in(received)), count_o200k("Echo: " + words)
    assert 0 < delivered <= charge["output_tokens"] < whole  # billed for what was sent: not nothing, not everything
    assert Decimal(shown.split("balance ")[1].split(" ")[0]) == 100 + Decimal(charge["amount"]) / 1_000_000
    line = next(
        line
        for line in streaming.log_lines()
        if line.get("logger") == "tollgate.access" and line.get("team") == team.name
    )
    assert line["status"] == 200
    assert line["error"].startswith("cut off: the client read nothing")
