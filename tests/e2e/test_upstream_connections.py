"""A pooled keep-alive connection to the upstream that dies before any byte of the answer came back:
the request is sent once more on a fresh connection and served, charged once — never when a byte of
the answer had arrived, and never twice (``app/upstream/connections.py``).

The upstream (``tests/support/keepalive_upstream.py``) answers a first request on a connection, which
the gateway then keeps in its pool; the next request goes on that connection, and the upstream breaks
it as the test says. Which request went on which connection is what the upstream saw."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.support import plain_http
from tests.support.gateway import Gateway, write_config
from tests.support.keepalive_upstream import COMPLETION_TEXT, KeepAliveUpstream, Seen
from tests.support.teams import Team, Teams

HELLO = [{"role": "user", "content": "ping"}]


@pytest.fixture(scope="module")
def upstream() -> Iterator[KeepAliveUpstream]:
    with KeepAliveUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def keepalive_gateway(tmp_path_factory: pytest.TempPathFactory, upstream: KeepAliveUpstream) -> Iterator[Gateway]:
    gateway = Gateway(write_config(tmp_path_factory.mktemp("keepalive"), upstream.base_url)).start()
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def teams(keepalive_gateway: Gateway) -> Iterator[Teams]:
    opened = Teams(keepalive_gateway.config)
    yield opened
    opened.close()


@pytest.fixture
def team(teams: Teams) -> Team:
    return teams.open("100")


def second_request_on_a_connection(fate: str):
    """Every connection's first request answered, its second one met with ``fate``."""
    return lambda connection, nth: fate if nth == 2 else "answer"


def pooled_then(
    upstream: KeepAliveUpstream, gateway: Gateway, team: Team, fate, *, stream: bool = False, model: str = "fake-gpt"
) -> httpx.Response:
    """A first request, which leaves its connection in the gateway's pool, then a second one (the
    answer returned), which the gateway sends on that pooled connection, and which meets ``fate``."""
    upstream.start_over(fate)
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        assert (
            client.chat.completions.create(model="fake-gpt", messages=HELLO).choices[0].message.content
            == COMPLETION_TEXT
        )
        return plain_http.post(
            f"{gateway.base_url}/chat/completions",
            timeout=30,
            headers={"authorization": f"Bearer {team.key}"},
            json={"model": model, "messages": HELLO, **({"stream": True} if stream else {})},
        )


def charged_requests(gateway: Gateway, team: Team) -> list[str]:
    return [row["request_id"] for row in gateway.charges(team.name)]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("fate", ["reset", "close"])
def test_a_pooled_connection_that_dies_before_answering_is_replaced_by_a_fresh_one(
    keepalive_gateway: Gateway, upstream: KeepAliveUpstream, team: Team, fate: str, stream: bool
):
    answer = pooled_then(upstream, keepalive_gateway, team, second_request_on_a_connection(fate), stream=stream)
    assert answer.status_code == 200, answer.text
    assert COMPLETION_TEXT in answer.text
    assert upstream.seen == [Seen(1, 1, "gpt-x", "answer"), Seen(1, 2, "gpt-x", fate), Seen(2, 1, "gpt-x", "answer")]
    charged = charged_requests(keepalive_gateway, team)
    assert len(charged) == 2
    assert charged.count(answer.headers["x-request-id"]) == 1


def test_a_connection_that_broke_off_after_a_byte_of_the_answer_is_not_sent_again(
    keepalive_gateway: Gateway, upstream: KeepAliveUpstream, team: Team
):
    answer = pooled_then(upstream, keepalive_gateway, team, second_request_on_a_connection("partial"))
    assert answer.status_code == 502, answer.text
    assert answer.json()["error"]["type"] == "server_error"
    assert upstream.seen == [Seen(1, 1, "gpt-x", "answer"), Seen(1, 2, "gpt-x", "partial")]
    assert answer.headers["x-request-id"] not in charged_requests(keepalive_gateway, team)
    assert len(charged_requests(keepalive_gateway, team)) == 1


def test_a_request_is_sent_again_once_at_most(keepalive_gateway: Gateway, upstream: KeepAliveUpstream, team: Team):
    """The fresh connection dies as well: that is the request's failure (502), not another try."""
    answer = pooled_then(
        upstream, keepalive_gateway, team, lambda connection, nth: "answer" if connection == 1 and nth == 1 else "reset"
    )
    assert answer.status_code == 502, answer.text
    assert upstream.seen == [Seen(1, 1, "gpt-x", "answer"), Seen(1, 2, "gpt-x", "reset"), Seen(2, 1, "gpt-x", "reset")]
    assert len(charged_requests(keepalive_gateway, team)) == 1


def test_the_fresh_connection_composes_with_the_failover_to_another_deployment(
    keepalive_gateway: Gateway, upstream: KeepAliveUpstream, team: Team
):
    """``refused-gpt``: its first deployment refuses connections, its second is this upstream (as
    ``gpt-b``), reached on the connection the first request left in the pool, which is dead."""
    answer = pooled_then(
        upstream, keepalive_gateway, team, second_request_on_a_connection("reset"), model="refused-gpt"
    )
    assert answer.status_code == 200, answer.text
    assert upstream.seen == [Seen(1, 1, "gpt-x", "answer"), Seen(1, 2, "gpt-b", "reset"), Seen(2, 1, "gpt-b", "answer")]
    assert charged_requests(keepalive_gateway, team).count(answer.headers["x-request-id"]) == 1
    line = keepalive_gateway.access_line(answer.headers["x-request-id"])
    assert line["upstream"] == {"attempts": 2, "deployment": 1, "errors": ["unreachable"]}
