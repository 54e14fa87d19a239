"""Limits against abuse on what a request may be, through real sockets: the body's size, its
number of messages, tools and content parts, the head's size and number of headers, and the time a
client has to send its head and its body. Each refusal comes in its endpoint's shape, and a refused
request moves no money: the team's balance and held amount stay as they were."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from functools import partial

import anthropic
import openai
import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.raw_http import closed_by_peer, connect, exchange, head, read_reply
from tests.support.teams import Team, Teams

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

LIMITS = """
max_request_bytes = 100000
max_messages = 5
max_tools = 3
max_content_parts = 6
max_header_bytes = 8192
max_headers = 40
header_timeout = 1
body_timeout = 1
"""
HI = {"role": "user", "content": "hi"}


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    """A gateway with small limits, so that tests reach them with small requests."""
    gw = Gateway(write_config(tmp_path_factory.mktemp("limited"), fake_upstream.base_url, settings=LIMITS)).start()
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def limited_teams(limited: Gateway) -> Iterator[Teams]:
    t = Teams(limited.config)
    yield t
    t.close()


@pytest.fixture
def payer(limited: Gateway, limited_teams: Teams) -> Iterator[Team]:
    """A team whose balance and held amount must be the same after the test as before it."""
    team = limited_teams.open("100")
    before = limited.wait_until_nothing_held(team.name)
    yield team
    assert limited.cli("team", "show", team.name).stdout == before
    assert limited.charges(team.name) == []


def openai_headers(team: Team) -> dict[str, str]:
    return {"authorization": f"Bearer {team.key}", "content-type": "application/json"}


def anthropic_headers(team: Team) -> dict[str, str]:
    return {"x-api-key": team.key, "anthropic-version": "2023-06-01", "content-type": "application/json"}


def assert_openai_error(body: dict, type_: str = "invalid_request_error", param: str | None = None) -> str:
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == type_
    assert body["error"]["param"] == param
    return body["error"]["message"]


def assert_anthropic_error(body: dict, type_: str = "invalid_request_error") -> str:
    assert body["type"] == "error"
    assert set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] == type_
    return body["error"]["message"]


# The body's size


def test_a_body_announced_over_the_limit_is_refused_before_it_is_read_and_the_connection_closed(
    limited: Gateway, payer: Team
):
    for path, headers in (("/v1/chat/completions", openai_headers(payer)), ("/v1/messages", anthropic_headers(payer))):
        announced = [*headers.items(), ("content-length", str(1024**3))]  # 1 GB, of which 10 bytes are sent
        reply, closed = exchange(limited.port, head("POST", path, announced) + b'{"model": ')
        assert reply.status == 413
        assert reply.headers["connection"] == "close"
        assert closed
        if path == "/v1/messages":
            message = assert_anthropic_error(reply.json(), "request_too_large")
        else:
            message = assert_openai_error(reply.json())
        assert "at most 100000 bytes" in message


def cleanly_closed(sock) -> bool:
    """Whether the gateway ended the connection with its end of the stream, not a reset."""
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return False


@pytest.mark.parametrize("refusal", [401, 413])
def test_a_client_still_sending_its_body_reads_the_early_answer_rather_than_a_reset(
    limited: Gateway, payer: Team, refusal: int
):
    """The answer comes before the body is read (the key is wrong; the body is over the limit): the
    connection closes, but only once the client has sent what it was sending, so it never fails on a
    write (ECONNRESET, EPIPE: many clients report only that) and reads its answer, then a clean end."""
    size, chunk = 3_000_000, b"x" * 65536
    key = payer.key if refusal == 413 else "tg-wrong"
    announced = [
        ("authorization", f"Bearer {key}"),
        ("content-type", "application/json"),
        ("content-length", str(size)),
    ]
    with connect(limited.port) as sock:
        sock.sendall(head("POST", "/v1/chat/completions", announced))
        for offset in range(0, size, len(chunk)):  # the whole body, a little at a time, as a slow link sends it
            sock.sendall(chunk[: size - offset])
            time.sleep(0.003)
        reply = read_reply(sock)
        assert reply.status == refusal
        assert reply.headers["connection"] == "close"
        assert_openai_error(reply.json(), "authentication_error" if refusal == 401 else "invalid_request_error")
        assert cleanly_closed(sock)


@pytest.mark.parametrize("refusal", [401, 413])
def test_the_sdk_reads_an_early_answer_to_a_large_body(limited: Gateway, payer: Team, refusal: int):
    with openai.OpenAI(
        base_url=limited.base_url, api_key=payer.key if refusal == 413 else "tg-wrong", max_retries=0
    ) as client:
        with pytest.raises(openai.APIStatusError) as refused:
            client.chat.completions.create(model="fake-gpt", messages=[{"role": "user", "content": "x" * 3_000_000}])
        assert refused.value.status_code == refusal


def test_a_chunked_body_is_read_no_further_than_the_limit(limited: Gateway, payer: Team):
    chunk = b"x" * 30_000
    with connect(limited.port) as sock:
        sock.sendall(
            head("POST", "/v1/chat/completions", [*openai_headers(payer).items(), ("transfer-encoding", "chunked")])
        )
        for _ in range(4):  # 120,000 bytes: over the limit on the fourth chunk
            sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        reply = read_reply(sock)
        assert reply.status == 413
        assert_openai_error(reply.json())
        assert closed_by_peer(sock)


def test_a_body_at_the_limit_is_read_and_one_byte_more_is_not(limited: Gateway, payer: Team):
    def body_of(size: int) -> bytes:
        body = b'{"model": "nope", "messages": [{"role": "user", "content": "'
        return body + b"x" * (size - len(body) - 4) + b'"}]}'

    read = plain_http.post(
        limited.base_url + "/chat/completions", content=body_of(100_000), headers=openai_headers(payer)
    )
    assert read.status_code == 404  # read and parsed, as far as its model
    refused = plain_http.post(
        limited.base_url + "/chat/completions", content=body_of(100_001), headers=openai_headers(payer)
    )
    assert refused.status_code == 413


# Numbers of messages, tools and content parts


def many(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(n)]


def tools(n: int, anthropic_style: bool = False) -> list[dict]:
    if anthropic_style:
        return [{"name": f"t{i}", "input_schema": {"type": "object"}} for i in range(n)]
    return [{"type": "function", "function": {"name": f"t{i}", "parameters": {"type": "object"}}} for i in range(n)]


def parts(n: int, kind: str = "text") -> list[dict]:
    return [{"type": kind, "text": f"p{i}"} for i in range(n)]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": many(6)}, "messages"),
        ({"messages": [HI], "tools": tools(4)}, "tools"),
        (
            {
                "messages": [
                    {"role": "user", "content": parts(4)},
                    {"role": "assistant", "content": "ok"},
                    {"role": "user", "content": parts(3)},
                ]
            },
            "messages[2].content",
        ),
    ],
)
def test_chat_refuses_too_many_messages_tools_or_parts_naming_the_field(limited: Gateway, payer: Team, body, param):
    with openai.OpenAI(base_url=limited.base_url, api_key=payer.key, max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model="fake-gpt", **body)
        message = assert_openai_error(refused.value.response.json(), param=param)
        assert "at most" in message


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": many(6)}, "input"),
        (
            {"input": "hi", "tools": [{"type": "function", "name": f"t{i}", "parameters": {}} for i in range(4)]},
            "tools",
        ),
        ({"input": [{"role": "user", "content": parts(7, "input_text")}]}, "input[0].content"),
    ],
)
def test_responses_refuses_too_many_items_tools_or_parts_naming_the_field(limited: Gateway, payer: Team, body, param):
    with openai.OpenAI(base_url=limited.base_url, api_key=payer.key, max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model="fake-codex", **body)
        assert_openai_error(refused.value.response.json(), param=param)


@pytest.mark.parametrize("endpoint", ["create", "count_tokens"])
@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"messages": [*many(5), HI]}, "'messages'"),
        ({"messages": [HI], "tools": tools(4, anthropic_style=True)}, "'tools'"),
        ({"system": parts(5), "messages": [{"role": "user", "content": parts(2)}]}, "'messages[0].content'"),
        ({"system": parts(7), "messages": [HI]}, "'system'"),
    ],
)
def test_messages_refuses_them_in_its_own_shape(limited: Gateway, payer: Team, endpoint, body, where):
    with anthropic.Anthropic(base_url=limited.root_url, api_key=payer.key, max_retries=0) as claude:
        send = partial(claude.messages.create, max_tokens=10) if endpoint == "create" else claude.messages.count_tokens
        with pytest.raises(anthropic.BadRequestError) as refused:
            send(model="fake-claude", **body)
        assert where in assert_anthropic_error(refused.value.body)


def test_a_request_at_every_limit_is_served(limited: Gateway, limited_teams: Teams):
    team = limited_teams.open("100")
    with openai.OpenAI(base_url=limited.base_url, api_key=team.key, max_retries=0) as client:
        messages = [*many(4), {"role": "user", "content": parts(6)}]
        completion = client.chat.completions.create(model="fake-gpt", messages=messages, tools=tools(3))
        assert completion.choices[0].message.content.startswith("Echo")
        with anthropic.Anthropic(base_url=limited.root_url, api_key=team.key, max_retries=0) as claude:
            counted = claude.messages.count_tokens(
                model="fake-claude",
                system=parts(2),
                tools=tools(3, anthropic_style=True),
                messages=[*many(4), {"role": "user", "content": parts(4)}],
            )
            assert counted.input_tokens > 0


# The head: its size, its number of headers, its time


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
@pytest.mark.parametrize("excess", ["one long header", "many headers"])
def test_a_head_over_its_limits_gets_431_in_the_endpoint_s_shape_and_the_connection_closes(
    limited: Gateway, payer: Team, path, excess
):
    headers = list(openai_headers(payer).items())
    headers += [("x-long", "a" * 9000)] if excess == "one long header" else [(f"x-h{i}", "1") for i in range(40)]
    reply, closed = exchange(limited.port, head("POST", path, headers, b"{}"))
    assert reply.status == 431
    assert reply.headers["connection"] == "close"
    assert closed
    message = assert_anthropic_error(reply.json()) if path == "/v1/messages" else assert_openai_error(reply.json())
    assert ("8192 bytes" if excess == "one long header" else "40 headers") in message


@pytest.mark.parametrize("excess", [[("x-big", "a" * 4_000_000)], [(f"x-h{i}", "1") for i in range(5000)]])
def test_a_huge_head_is_refused_without_being_read_to_its_end(limited: Gateway, excess):
    data = head("GET", "/v1/models", excess)
    with connect(limited.port) as sock:
        replies: list = []
        reader = threading.Thread(target=lambda: replies.append(read_reply(sock)))
        reader.start()
        sent = 0
        try:
            while sent < len(data):
                sent += sock.send(data[sent : sent + 65536])
        except OSError:
            pass  # the gateway closed the connection while we were still sending
        reader.join(10)
    assert replies
    assert replies[0].status == 431


def test_a_head_of_many_ordinary_headers_is_served(limited: Gateway):
    headers = [("connection", "close"), *((f"x-h{i}", "1") for i in range(30))]
    reply, _ = exchange(limited.port, head("GET", "/v1/models", headers))
    assert reply.status == 200


@pytest.mark.parametrize("sent", [b"", b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"])
def test_a_connection_that_never_completes_its_head_is_closed_with_408(limited: Gateway, sent: bytes):
    with connect(limited.port) as sock:
        sock.sendall(sent)
        reply = read_reply(sock)  # waits at most the socket's 10 s: the gateway's header_timeout is 1 s
        assert reply.status == 408
        assert "did not arrive within 1 seconds" in assert_openai_error(reply.json())
        assert closed_by_peer(sock)


def test_a_head_sent_a_byte_at_a_time_is_cut_off_at_the_timeout(limited: Gateway, payer: Team):
    data = head("POST", "/v1/messages", anthropic_headers(payer), b"{}")
    with connect(limited.port) as sock:
        started = time.monotonic()
        try:
            for byte in data:
                sock.send(bytes([byte]))
                time.sleep(0.05)  # all of it would take ~10 s
        except OSError:
            pass
        reply = read_reply(sock)
        assert reply.status == 408
        assert time.monotonic() - started < 8
        assert_anthropic_error(reply.json())


# The body's time


@pytest.mark.parametrize("trickle", [False, True])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_a_body_that_does_not_arrive_in_time_gets_408_in_the_endpoint_s_shape(
    limited: Gateway, payer: Team, path, trickle
):
    headers = openai_headers(payer) if path == "/v1/chat/completions" else anthropic_headers(payer)
    announced = [*headers.items(), ("content-length", "1000")]
    with connect(limited.port) as sock:
        sock.sendall(head("POST", path, announced) + b'{"model": "fake-gpt", ')
        if trickle:  # a byte every 0.2 s would take 200 s
            try:
                for _ in range(50):
                    sock.send(b" ")
                    time.sleep(0.2)
            except OSError:
                pass
        reply = read_reply(sock)
        assert reply.status == 408
        assert reply.headers["connection"] == "close"
        message = assert_anthropic_error(reply.json()) if path == "/v1/messages" else assert_openai_error(reply.json())
        assert "did not arrive within 1 seconds" in message
