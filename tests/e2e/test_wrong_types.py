"""A field of the wrong type is the client's error, never the gateway's crash.

Wherever a translator or the prompt counter reads a client's field, a value of another type is a
400 that names the field, in the endpoint's shape — not a 500 that SDKs retry. A request passed
through to an upstream of its own protocol is judged by that upstream (Tollgate forwards what it
does not need to read), but counting its prompt must never crash either. Every refusal leaves the
team's balance as it was.
"""

from __future__ import annotations

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import plain_http
from tests.support.full_bodies import MODELS, PATHS, field_paths, full_body, with_value
from tests.support.gateway import Gateway
from tests.support.refusals import error_of, key_headers, money_of

pytestmark = pytest.mark.usefixtures("ledger_verified_after")


def _post(gateway: Gateway, key: str, path: str, body: dict) -> httpx.Response:
    headers = {**key_headers(key), "anthropic-version": "2023-06-01"}
    return plain_http.post(gateway.root_url + path, json=body, headers=headers, timeout=60)


# -- the inputs the review found crashing ---------------------------------------------------------


def _message(model: str, **fields) -> dict:
    return {"model": model, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}], **fields}


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"metadata": "x"}, "'metadata'"),
        ({"stop_sequences": 5}, "'stop_sequences'"),
        ({"thinking": {"type": "enabled", "budget_tokens": "abc"}}, "'thinking.budget_tokens'"),
        ({"tool_choice": 5}, "'tool_choice'"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image", "source": "abc"}]}]},
            "'messages.0.content.0.source'",
        ),
        ({"messages": [{"role": "user", "content": [None]}]}, "'messages.0.content.0'"),
        (
            {"messages": [{"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": 5}]}]},
            "'messages.0.content.0.signature'",
        ),
        ({"tools": [{"name": "t", "description": ["x"], "input_schema": {}}]}, "'tools.0.description'"),
    ],
)
def test_a_messages_field_of_the_wrong_type_for_a_chat_upstream_is_a_400_naming_it(gateway, team, fields, named):
    before = money_of(gateway, team.name)
    error = error_of(_post(gateway, team.key, "/v1/messages", _message("vision-gpt", **fields)), 400)
    assert error["type"] == "invalid_request_error"
    assert named in error["message"]
    assert money_of(gateway, team.name) == before


def test_a_bare_tool_choice_string_is_taken_as_its_type(gateway, team):
    assert _post(gateway, team.key, "/v1/messages", _message("fake-gpt", tool_choice="auto")).status_code == 200


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/responses", {"model": "fake-gpt", "input": "hi", "text": {"format": "json"}}, "text.format"),
        (
            "/v1/responses",
            {"model": "fake-claude", "input": "hi", "tools": [{"type": "custom", "name": "patch", "format": "lark"}]},
            "tools[0].format",
        ),
        (
            "/v1/responses",
            {"model": "fake-claude", "input": [{"type": "function_call_output", "call_id": ["c"], "output": "x"}]},
            "input[0].call_id",
        ),
        (
            "/v1/chat/completions",
            {"model": "fake-claude", "messages": [{"role": "user", "content": "hi"}], "reasoning_effort": ["high"]},
            "reasoning_effort",
        ),
        (
            "/v1/chat/completions",
            {
                "model": "fake-claude",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {}}],
            },
            "tools[0].function.name",
        ),
        (
            "/v1/chat/completions",
            {"model": "fake-claude", "messages": [{"role": "user", "content": "hi"}], "stop": [None]},
            "stop[0]",
        ),
        (
            "/v1/chat/completions",
            {"model": "fake-codex", "messages": [{"role": "assistant", "content": "x", "tool_calls": True}]},
            "messages[0].tool_calls",
        ),
    ],
)
def test_an_openai_field_of_the_wrong_type_for_another_upstream_is_a_400_naming_it(gateway, team, path, body, param):
    before = money_of(gateway, team.name)
    error = error_of(_post(gateway, team.key, path, body), 400)
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"
    assert money_of(gateway, team.name) == before


@pytest.mark.parametrize(
    ("path", "model", "body"),
    [
        (
            "/v1/chat/completions",
            "fake-gpt",
            {
                "messages": [
                    {"role": "assistant", "content": "x", "tool_calls": True},
                    {"role": "user", "content": "hi"},
                ]
            },
        ),
        ("/v1/messages", "fake-claude", {"max_tokens": 10, "messages": [{"role": "user", "content": 5}]}),
        (
            "/v1/messages/count_tokens",
            "fake-claude",
            {"messages": [{"role": "user", "content": [None, 5, {"type": 5}]}], "system": 7, "tools": "x"},
        ),
        ("/v1/responses", "fake-codex", {"input": [{"type": "message", "role": "user", "content": 5}]}),
    ],
)
def test_a_request_passed_through_is_judged_by_its_upstream_and_never_crashes_the_counter(
    gateway, team, path, model, body
):
    response = _post(gateway, team.key, path, {**body, "model": model})
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        error_of(response)


# -- every field, every type ------------------------------------------------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
    | st.sampled_from(["text", "image", "function", "tool_use", "auto", "user", "data:image/png;base64,AA=="])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["type", "text", "name", "content", "x"]), inner, max_size=3)
    ),
    max_leaves=6,
)

PAIRS = [(protocol, wire) for protocol in PATHS for wire in MODELS]


@pytest.mark.parametrize(("protocol", "wire"), PAIRS, ids=[f"{p}-to-{w}" for p, w in PAIRS])
def test_any_value_in_any_field_is_served_or_refused_cleanly_and_a_refusal_costs_nothing(
    gateway, teams, protocol, wire
):
    """For each client protocol and each upstream wire (six translations, three pass-throughs):
    the full body with one field given an arbitrary JSON value is either served, or refused with
    a 4xx in the endpoint's shape (never 5xx, never a rate limit), the team's balance unchanged."""
    team = teams.open("100")
    body = full_body(protocol, MODELS[wire])
    paths = field_paths(protocol)
    last = [money_of(gateway, team.name)]

    @settings(
        max_examples=35, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
    )
    @given(path=st.sampled_from(paths), value=_VALUES)
    def served_or_refused(path: tuple, value: object) -> None:
        response = _post(gateway, team.key, PATHS[protocol], with_value(body, path, value))
        now = money_of(gateway, team.name)
        if response.status_code >= 300:
            assert response.status_code != 429, response.text
            error_of(response)
            assert now[0] == last[0][0], f"a refused request changed the balance: {path}={value!r}"
        last[0] = now

    served_or_refused()
