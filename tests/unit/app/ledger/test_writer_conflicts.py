"""The gateway's ledger writer behind another process's writes: its copy of the team is stale, its
next save conflicts, and it must catch up and decide again — the charge made once, the other
process's credits kept. (The writer's batching and a refused row failing alone: ``test_ledger_writer.py``
and ``test_ledger_faults.py``.)"""

from __future__ import annotations

import logging

from tests.support.in_process import InProcessGateway, charge_of, ledger_of, team_state, top_up_from_another_process

HELLO = [{"role": "user", "content": "hello there gateway"}]


def test_a_hold_decided_on_a_stale_team_is_decided_again_after_catching_up(gateway: InProcessGateway, caplog):
    caplog.set_level(logging.INFO, logger="tollgate.ledger")
    team = gateway.open_team("acme", "1")
    first = gateway.post(team, "/v1/chat/completions", {"model": "demo-gpt", "messages": HELLO})
    assert first.status_code == 200
    caplog.clear()
    # From here any save of the team's conflicts until the writer catches up: usually the hold below,
    # but on a slow machine the credit lease the first request's charge refilled may be saved first.
    top_up_from_another_process(gateway, "acme", 5_000_000)
    second = gateway.post(
        team, "/v1/chat/completions", {"model": "demo-gpt", "messages": HELLO}, **{"idempotency-key": "second"}
    )  # a durable hold: a save right away, on the stale copy
    assert second.status_code == 200, second.text
    assert "lost a version race" in caplog.text  # the path under test was taken
    with ledger_of(gateway) as ledger:
        charged = sum(charge_of(ledger, "acme", a.headers["x-request-id"]).charged for a in (first, second))
        after = team_state(ledger, "acme")
        assert (after.balance, after.held) == (1_000_000 + 5_000_000 - charged, 0)
