"""Credit leases through the real application: requests without an Idempotency-Key are held in
memory against a slice of the balance the ledger set aside for this process, so each costs one
durable write (its charge) instead of two; a lease never lets a team spend more than it has, and
what it set aside goes back to the team when the gateway stops."""

from __future__ import annotations

from app.tokens import prompt_tokens, rules_for
from domain.pricing import worst_case_in_micros
from tests.support.in_process import InProcessGateway, charge_of, in_credits, ledger_of, team_state

HELLO = [{"role": "user", "content": "hello there gateway"}]


def test_requests_on_a_lease_cost_one_durable_write_each_and_idempotent_ones_two(gateway: InProcessGateway):
    leased, durable = gateway.open_team("leased", "100"), gateway.open_team("durable", "100")
    before = {name: team_state(gateway.runtime.store, name).events for name in ("leased", "durable")}
    for n in range(5):
        assert gateway.post(leased, "/v1/chat/completions", {"model": "demo-gpt", "messages": HELLO}).status_code == 200
        assert (
            gateway.post(
                durable,
                "/v1/chat/completions",
                {"model": "demo-gpt", "messages": HELLO},
                **{"idempotency-key": f"k{n}"},
            ).status_code
            == 200
        )
    leased_writes = team_state(gateway.runtime.store, "leased").events - before["leased"]
    durable_writes = team_state(gateway.runtime.store, "durable").events - before["durable"]
    assert leased_writes == 1 + 5  # the lease, then five charges
    assert durable_writes == 2 * 5  # a hold and a charge each


def test_what_a_lease_set_aside_goes_back_to_the_team_when_the_gateway_stops(gateway: InProcessGateway):
    team = gateway.open_team("acme", "100")
    answers = [gateway.post(team, "/v1/chat/completions", {"model": "demo-gpt", "messages": HELLO}) for _ in range(3)]
    running = team_state(gateway.runtime.store, "acme")
    assert running.held > 0  # set aside for this process, nothing of it charged
    with ledger_of(gateway) as ledger:
        charged = sum(charge_of(ledger, "acme", a.headers["x-request-id"]).charged for a in answers)
        after = team_state(ledger, "acme")
        assert (after.balance, after.held) == (100_000_000 - charged, 0)


def test_a_lease_takes_no_more_than_the_team_has_and_a_request_it_cannot_cover_is_refused(gateway: InProcessGateway):
    """A lease grows by many worst cases when it can; a team with little more than one gets that,
    is served once, and is refused (402, before the upstream) once what is left is less than one."""
    model = gateway.settings.model("demo-gpt")
    body = {"model": "demo-gpt", "messages": HELLO, "max_tokens": 100}
    prompt = prompt_tokens(body, "chat", rules_for(model.tokenizer, "chat"))
    worst_case = worst_case_in_micros(prompt, 100, model.price, gateway.settings.credits_per_usd)
    team = gateway.open_team("small", str(in_credits(worst_case + 1_000)))  # a demo answer costs more than 1,000
    first, second = (gateway.post(team, "/v1/chat/completions", body) for _ in range(2))
    assert (first.status_code, second.status_code) == (200, 402)
    with ledger_of(gateway) as ledger:
        charged = charge_of(ledger, "small", first.headers["x-request-id"]).charged
        assert charged > 1_000
        after = team_state(ledger, "small")
        assert (after.balance, after.held) == (worst_case + 1_000 - charged, 0)
