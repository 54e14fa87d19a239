"""Limits against abuse on streams, through real sockets: a client that stops reading, cut off
after ``write_timeout`` and billed for what was sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal

import pytest

from app.tokens.encoding import count_o200k
from tests.conftest import Teams
from tests.fake_upstream import FakeUpstream
from tests.gateway import Gateway, write_config
from tests.raw_http import connect, head

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

LIMITS = "write_timeout = 1\n"


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
def test_a_client_that_stops_reading_is_cut_off_and_billed_for_what_was_sent(streaming: Gateway,
                                                                             stream_teams: Teams, endpoint):
    team = stream_teams.open("100")
    words = " ".join(f"w{i}" for i in range(WORDS))  # echoed back: ~20 MB of frames, more than buffers hold
    if endpoint == "chat":
        path, headers = "/v1/chat/completions", {"authorization": f"Bearer {team.key}"}
        body = {"model": "agent-gpt", "stream": True, "messages": [{"role": "user", "content": words}]}
    else:
        path, headers = "/v1/messages", {"x-api-key": team.key, "anthropic-version": "2023-06-01"}
        body = {"model": "agent-claude", "max_tokens": 128000, "stream": True,
                "messages": [{"role": "user", "content": words}]}
    request = head("POST", path, {**headers, "content-type": "application/json"}, json.dumps(body).encode())
    with connect(streaming.port, receive_buffer=4096) as sock:
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
    line = next(line for line in streaming.log_lines() if line.get("logger") == "tollgate.access"
                and line.get("team") == team.name)
    assert line["status"] == 200 and line["error"].startswith("cut off: the client read nothing")
