"""Generated bodies for POST /v1/embeddings: never a 5xx of the gateway's own, never a traceback, no
money moved by an error answer, every refusal in OpenAI's error shape; a served one is a list of
embeddings charged exactly once, the team's balance moved by exactly that charge."""

from __future__ import annotations

from tests.support.fuzz.embeddings import embeddings_bodies
from tests.support.fuzz.harness import Ledger, Run, exercise, fuzz
from tests.support.fuzz.served import PATHS, check_served, headers_for
from tests.support.gateway import Gateway
from tests.support.teams import Team


def test_no_generated_embeddings_body_breaks_the_gateway_or_moves_money_when_refused(
    fuzz_gateway: Gateway, fuzz_team: Team, ledger: Ledger, run: Run
):
    url, headers = fuzz_gateway.root_url + PATHS["embeddings"], headers_for("embeddings", fuzz_team.key)
    route = "embeddings→fake-embedding"

    def one(body: bytes) -> None:
        sent = exercise(run, ledger, route, url, headers, body)
        check_served(run, ledger, sent, "embeddings", False, route, body)

    fuzz(one, body=embeddings_bodies("fake-embedding"))
    run.check()
