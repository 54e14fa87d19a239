"""Generated request bodies for the three generation endpoints and count_tokens, on a model of each
kind of upstream (passed through to its own protocol, and translated to another): never a 5xx of the
gateway's own, never a traceback, no money moved by an error answer (tests/support/fuzz/harness.py)."""

from __future__ import annotations

import pytest

from tests.support.fuzz.bodies import bodies
from tests.support.fuzz.harness import Ledger, Run, exercise, fuzz
from tests.support.gateway import Gateway
from tests.support.teams import Team

PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages",
         "count_tokens": "/v1/messages/count_tokens"}
#: (endpoint, model): the model's upstream speaks the endpoint's protocol (passed through), or not.
CASES = [("chat", "fake-gpt"), ("chat", "fake-claude"), ("responses", "fake-codex"), ("responses", "fake-gpt"),
         ("messages", "fake-claude"), ("messages", "fake-gpt"), ("count_tokens", "fake-claude"),
         ("count_tokens", "fake-codex")]


def headers_for(endpoint: str, team: Team) -> dict[str, str]:
    if endpoint in ("messages", "count_tokens"):
        return {"x-api-key": team.key, "anthropic-version": "2023-06-01", "content-type": "application/json"}
    return {"authorization": f"Bearer {team.key}", "content-type": "application/json"}


@pytest.mark.parametrize(("endpoint", "model"), CASES)
def test_no_generated_body_breaks_the_gateway_or_moves_money_when_refused(fuzz_gateway: Gateway, fuzz_team: Team,
                                                                          ledger: Ledger, run: Run, endpoint, model):
    url, headers = fuzz_gateway.root_url + PATHS[endpoint], headers_for(endpoint, fuzz_team)
    route = f"{endpoint}→{model}"

    def one(body: bytes) -> None:
        exercise(fuzz_gateway, ledger, run.tally, run.watch, route, url, headers, body)

    fuzz(one, body=bodies(endpoint, model))
    run.check()
