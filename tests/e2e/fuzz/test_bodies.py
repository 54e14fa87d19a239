"""Generated request bodies for the three generation endpoints and count_tokens, on a model of each
kind of upstream (passed through to its own protocol, and translated to another): never a 5xx of the
gateway's own, never a traceback, no money moved by an error answer, the audit history projection
keeping up (tests/support/fuzz/harness.py); and a served one charged exactly once or not at all (a
stream that failed before it delivered anything) — the team's balance moved by what the ledger's
charge of that request took, and by nothing for a count of tokens."""

from __future__ import annotations

import pytest

from tests.support.fuzz.bodies import bodies
from tests.support.fuzz.harness import Ledger, Run, exercise, fuzz
from tests.support.fuzz.served import PATHS, charged_once, headers_for
from tests.support.gateway import Gateway
from tests.support.teams import Team

#: (endpoint, model): the model's upstream speaks the endpoint's protocol (passed through), or not.
CASES = [
    ("chat", "fake-gpt"),
    ("chat", "fake-claude"),
    ("responses", "fake-codex"),
    ("responses", "fake-gpt"),
    ("messages", "fake-claude"),
    ("messages", "fake-gpt"),
    ("count_tokens", "fake-claude"),
    ("count_tokens", "fake-codex"),
]


@pytest.mark.parametrize(("endpoint", "model"), CASES)
def test_no_generated_body_breaks_the_gateway_or_moves_money_when_refused(
    fuzz_gateway: Gateway, fuzz_team: Team, ledger: Ledger, run: Run, endpoint, model
):
    url, headers = fuzz_gateway.root_url + PATHS[endpoint], headers_for(endpoint, fuzz_team.key)
    route = f"{endpoint}→{model}"

    def one(body: bytes) -> None:
        sent = exercise(run, ledger, route, url, headers, body)
        if sent is not None and 200 <= sent.response.status_code < 300:
            charged_once(run, ledger, sent.before, sent.response, route, body, required=False)

    fuzz(one, body=bodies(endpoint, model))
    run.check()
