"""Every refused request leaves the team's money exactly as it was: its balance and its held
credits. For each generation endpoint (and count_tokens), each kind of refusal that can come after
the key is known, on a model of each upstream kind: the refusal is a 4xx in the endpoint's shape,
the upstream is never called, and the ledger shows the same balance and nothing held."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import STRICT_MODELS, Gateway
from tests.support.refusals import error_of, key_headers, money_of

#: The wire each strict model's upstream speaks (a request in that protocol passes through).
WIRES = {"strict-gpt": "chat", "strict-demo": "chat", "strict-claude": "messages", "strict-codex": "responses"}
PROTOCOLS = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
    "/v1/messages/count_tokens": "messages",
}
LONG = "word " * 12_000  # more tokens than the strict models' 8,192-token context window
IMAGE = "iVBORw0KGgo="


def _body(path: str, text: str = "hi", **fields) -> dict:
    if path == "/v1/chat/completions":
        return {"messages": [{"role": "user", "content": text}], **fields}
    if path == "/v1/responses":
        return {"input": text, **fields}
    return {
        "messages": [{"role": "user", "content": text}],
        **({"max_tokens": 16} if path == "/v1/messages" else {}),
        **fields,
    }


def _image(path: str) -> dict:
    if path == "/v1/chat/completions":
        part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMAGE}"}}
        return {"messages": [{"role": "user", "content": [part]}]}
    if path == "/v1/responses":
        return {
            "input": [
                {"role": "user", "content": [{"type": "input_image", "image_url": f"data:image/png;base64,{IMAGE}"}]}
            ]
        }
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": IMAGE}}
    return {"max_tokens": 16, "messages": [{"role": "user", "content": [block]}]}


_BAD_TYPE = {
    "/v1/chat/completions": {"temperature": "hot"},
    "/v1/responses": {"max_output_tokens": "many"},
    "/v1/messages": {"max_tokens": "many"},
    "/v1/messages/count_tokens": {"messages": "hi"},
}
_TOO_MUCH_OUTPUT = {
    "/v1/chat/completions": {"max_tokens": 100_000},
    "/v1/responses": {"max_output_tokens": 100_000},
    "/v1/messages": {"max_tokens": 100_000},
}
_BUILTIN = {
    "/v1/chat/completions": {"tools": [{"type": "web_search"}]},
    "/v1/responses": {"tools": [{"type": "web_search"}]},
    "/v1/messages": {"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
}
#: A field only an upstream of the client's own protocol can take.
_UNTRANSLATABLE = {
    "/v1/chat/completions": {"n": 2},
    "/v1/responses": {"previous_response_id": "resp_1"},
    "/v1/messages": {"messages": [{"role": "user", "content": [{"type": "container_upload_x"}]}]},
}


def _cases() -> list[tuple[str, str, str]]:
    cases = []
    for path, protocol in PROTOCOLS.items():
        counting = path.endswith("count_tokens")
        for model in STRICT_MODELS:
            kinds = ["bad type", "unknown model", "rate limit"]
            if not counting:
                kinds += ["output limit", "context window", "vision", "built-in tool", "insufficient credits"]
                if WIRES[model] != protocol:
                    kinds.append("untranslatable")
            cases += [(path, model, kind) for kind in kinds]
    return cases


CASES = _cases()


@pytest.mark.parametrize(
    ("path", "model", "kind"), CASES, ids=[f"{p.removeprefix('/v1/')}-{m}-{k}" for p, m, k in CASES]
)
def test_a_refused_request_leaves_the_balance_and_holds_as_they_were(
    gateway: Gateway, teams, fake_upstream: FakeUpstream, path: str, model: str, kind: str
):
    balance = "0.000001" if kind == "insufficient credits" else "10"
    team = teams.open(balance, key_rpm=1 if kind == "rate limit" else None)
    headers = {**key_headers(team.key), "anthropic-version": "2023-06-01"}
    body, status = {**_body(path), "model": model}, 400
    if kind == "bad type":
        body.update(_BAD_TYPE[path])
    elif kind == "unknown model":
        body["model"], status = "no-such-model", 404
    elif kind == "output limit":
        body.update(_TOO_MUCH_OUTPUT[path])
    elif kind == "context window":
        body = {**_body(path, LONG), "model": model}
    elif kind == "vision":
        body = {**_image(path), "model": model}
    elif kind == "built-in tool":
        body.update(_BUILTIN[path])
    elif kind == "untranslatable":
        body.update(_UNTRANSLATABLE[path])
    elif kind == "insufficient credits":
        status = 402
    elif kind == "rate limit":  # the key's one request a minute, taken by counting a prompt (which costs nothing)
        counted = plain_http.post(
            gateway.root_url + "/v1/messages/count_tokens",
            headers=headers,
            timeout=30,
            json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
        )
        assert counted.status_code == 200, counted.text
        status = 429
    before = money_of(gateway, team.name)
    assert before == (Decimal(balance), 0)
    answer = plain_http.post(gateway.root_url + path, json=body, headers=headers, timeout=60)
    error_of(answer, status)
    if status == 429:
        assert int(answer.headers["retry-after"]) >= 1
    assert money_of(gateway, team.name) == before
    assert fake_upstream.requests == []
