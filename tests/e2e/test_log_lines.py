"""What a client sends cannot forge log lines: in text logs, control characters in every field
(a path with ``%0A``, a model name with a newline or an escape sequence) are written as escapes and
values that could pass for more fields are quoted; JSON logs are one object per line."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config

FORGED = "2026-01-01 00:00:00,000 INFO tollgate.access: FORGED"
#: How a text log's record begins; a traceback's lines are indented.
_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ [\w.]+: ")


def _forge(gateway: Gateway, key: str) -> list[str]:
    """Requests that carry a forged line in their path and model name; their request ids."""
    headers = {"authorization": f"Bearer {key}"}
    answers = [
        plain_http.post(
            f"{gateway.root_url}/v1/chat/completions%0A{FORGED.replace(' ', '%20')}", headers=headers, json={}
        ),
        plain_http.post(
            f"{gateway.base_url}/chat/completions",
            headers=headers,
            json={
                "model": f"fake-gpt\n{FORGED}\r\x1b[2K\u2028{FORGED}",
                "messages": [{"role": "user", "content": "hi"}],
            },
        ),
        plain_http.post(
            f"{gateway.root_url}/v1/messages",
            headers={"x-api-key": key},
            json={"model": f'x status=200 team="other"\n{FORGED}', "max_tokens": 5, "messages": []},
        ),
    ]
    assert [a.status_code for a in answers] == [404, 404, 404]
    return [a.headers["x-request-id"] for a in answers]


@pytest.fixture(scope="module")
def text_gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    config = write_config(tmp_path_factory.mktemp("text-logs"), fake_upstream.base_url, settings='log_format = "text"')
    gateway = Gateway(config).start()
    yield gateway
    gateway.stop()


def test_text_log_fields_are_escaped_so_no_request_starts_a_line(text_gateway: Gateway):
    from tests.support.teams import Teams

    teams = Teams(text_gateway.config)
    try:
        ids = _forge(text_gateway, teams.open("1").key)
    finally:
        teams.close()
    output = text_gateway.stop()  # every line written
    records = [line for line in output.splitlines() if _RECORD.match(line) or line.startswith("    ")]
    lines = {i: next(line for line in records if f"request_id={i}" in line) for i in ids}
    for line in output.splitlines():
        assert not line.startswith(("FORGED", FORGED)), line
        assert not line.startswith("\x1b"), line
    assert "\\n2026-01-01 00:00:00,000 INFO tollgate.access: FORGED" in lines[ids[0]]
    assert "\\r\\x1b[2K\\u2028" in lines[ids[1]]
    assert 'error="The model `x status=200 team=\\"other\\"\\n2026-01-01' in lines[ids[2]]


def test_json_log_lines_are_one_object_a_line_whatever_the_request_carried(gateway: Gateway, team):
    ids = _forge(gateway, team.key)
    lines = {i: gateway.access_line(i) for i in ids}
    assert lines[ids[0]]["path"] == f"/v1/chat/completions\n{FORGED}"
    assert FORGED in lines[ids[1]]["error"]
    assert "\u2028" in lines[ids[1]]["error"]
    for line in gateway.output().splitlines():
        assert not line.startswith(("FORGED", FORGED)), line


#: A request of each protocol asking more output than the model gives, which the gateway refuses (400).
TOO_LONG = {
    "/chat/completions": {"model": "fake-gpt", "max_tokens": 100_000, "messages": [{"role": "user", "content": "hi"}]},
    "/responses": {"model": "fake-codex", "max_output_tokens": 100_000, "input": "hi"},
    "/messages": {"model": "fake-claude", "max_tokens": 100_000, "messages": [{"role": "user", "content": "hi"}]},
}


@pytest.mark.parametrize("path", list(TOO_LONG))
def test_a_refused_request_is_logged_streaming_as_its_client_asked(gateway: Gateway, team, path: str):
    headers = {"authorization": f"Bearer {team.key}", "anthropic-version": "2023-06-01"}
    for stream in (True, False):
        answer = plain_http.post(gateway.base_url + path, headers=headers, json={**TOO_LONG[path], "stream": stream})
        assert answer.status_code == 400, answer.text
        line = gateway.access_line(answer.headers["x-request-id"])
        assert (line["status"], line["stream"]) == (400, stream)
        assert line["ttft_ms"] is None  # no stream opened: no first token to time
    unknown = plain_http.post(
        gateway.base_url + path, headers=headers, json={**TOO_LONG[path], "model": "nope", "stream": True}
    )
    assert unknown.status_code == 404
    assert gateway.access_line(unknown.headers["x-request-id"])["stream"] is True
