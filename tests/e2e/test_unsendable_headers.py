"""A client's own words in an answer's headers never cost it an answer it does not get.

A translated request's built-in tools are dropped and named in ``x-tollgate-dropped-tools``; a tool
``type`` is the client's free text, and HTTP header values are Latin-1 without line breaks. A type
such as ``"网络搜索"`` or one holding CR/LF used to be served and charged, and only then did the
header fail: a plain-text 500 (which the SDKs retry, each retry charged again) or a connection cut
with no answer. Now every name is percent-encoded (UTF-8, as RFC 8187 does), so the request gets its
answer, with the header, charged exactly once — through the official SDKs, whose retries would
show up here as more upstream calls and more charges.
"""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import unquote

import anthropic
import openai
import pytest

from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

#: Tool types no header can carry as they are: not Latin-1, and a line break (a header injection).
UNSENDABLE = ["网络搜索", "web_search\r\nx-injected: 1"]


def dropped_names(header: str) -> list[str]:
    return [unquote(name) for name in header.split(", ")]


@pytest.mark.parametrize("kind", UNSENDABLE, ids=["not-latin-1", "cr-lf"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_the_openai_sdk_gets_its_answer_charged_once(
    gateway: Gateway, team, fake_upstream: FakeUpstream, kind: str, stream: bool
):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=2) as client:  # the SDK retries itself
        tools = cast(Any, [{"type": kind}, {"type": "web_search"}])
        raw = client.chat.completions.with_raw_response.create(
            model="fake-claude", messages=[{"role": "user", "content": "hello"}], tools=tools, stream=stream
        )
        if stream:
            text = "".join(chunk.choices[0].delta.content or "" for chunk in raw.parse() if chunk.choices)
        else:
            text = raw.parse().choices[0].message.content or ""
        assert text == "Echo: hello"
        assert dropped_names(raw.headers["x-tollgate-dropped-tools"]) == [kind, "web_search"]
        assert "x-injected" not in raw.headers
        assert raw.headers["x-request-id"].startswith("req_")
        assert len(fake_upstream.requests) == 1  # no retry
        (charge,) = gateway.charges(team.name)
        assert charge["request_id"] == raw.headers["x-request-id"]
        assert gateway.access_line(raw.headers["x-request-id"])["dropped_tools"] == [kind, "web_search"]


@pytest.mark.parametrize("kind", UNSENDABLE, ids=["not-latin-1", "cr-lf"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_the_anthropic_sdk_gets_its_answer_charged_once(
    gateway: Gateway, team, fake_upstream: FakeUpstream, kind: str, stream: bool
):
    with anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=2) as client:
        tools = cast(Any, [{"type": kind, "name": "search"}])
        raw = client.messages.with_raw_response.create(
            model="fake-gpt", max_tokens=50, messages=[{"role": "user", "content": "hello"}], tools=tools, stream=stream
        )
        if stream:
            text = "".join(
                event.delta.text
                for event in raw.parse()
                if event.type == "content_block_delta" and event.delta.type == "text_delta"
            )
        else:
            text = "".join(block.text for block in raw.parse().content if block.type == "text")
        assert text == "Echo: hello"
        assert dropped_names(raw.headers["x-tollgate-dropped-tools"]) == [kind]
        assert "x-injected" not in raw.headers
        assert len(fake_upstream.requests) == 1
        (charge,) = gateway.charges(team.name)
        assert charge["request_id"] == raw.headers["x-request-id"] == raw.headers["request-id"]
