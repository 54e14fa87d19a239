"""``TOLLGATE_CLOCK_OFFSET`` is a drill's, and cannot move money by accident.

A gateway refuses to start with an offset unless ``TOLLGATE_CLOCK_DRILL=1`` says it is a drill, and
refuses an offset behind the wall clock (−31 days used to fall before every price in the price list:
each request was served, then failed to be charged, 500) or beyond 31 days. A drill's clock run a day
ahead charges the key's next day's budget; when the wall-clock gateway serves the key again the same
day, the team's ledger judges it at the drill's instant — the day whose budget the drill spent —
instead of starting today's count again (+1 day used to let an exhausted daily budget spend again the
same wall-clock day, and the next day's once more when it came).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import openai
import pytest

from tests.e2e.test_budgets import ASK, admin, ask, key_id_of, until_budgeted
from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Team

DAY = 86400


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"TOLLGATE_CLOCK_OFFSET": str(DAY)}, "TOLLGATE_CLOCK_DRILL is not 1"),
        ({"TOLLGATE_CLOCK_OFFSET": str(-31 * DAY), "TOLLGATE_CLOCK_DRILL": "1"}, "must not be negative"),
        ({"TOLLGATE_CLOCK_OFFSET": str(32 * DAY), "TOLLGATE_CLOCK_DRILL": "1"}, "must be at most 2,678,400 seconds"),
        ({"TOLLGATE_CLOCK_OFFSET": "soon", "TOLLGATE_CLOCK_DRILL": "1"}, "must be a number of seconds"),
    ],
)
def test_a_gateway_with_a_clock_offset_that_is_no_drill_s_refuses_to_start(
    tmp_path: Path, fake_upstream: FakeUpstream, env, said
):
    gateway = Gateway(write_config(tmp_path, fake_upstream.base_url), env=env)
    try:
        with pytest.raises(RuntimeError, match="tollgate serve exited"):
            gateway.start()
        assert gateway.process is not None
        assert gateway.process.wait(timeout=10) == 2
        assert said in gateway.output()
        assert "TOLLGATE_CLOCK_OFFSET" in gateway.output()
    finally:
        gateway.stop()


def spend_the_day(client: openai.OpenAI) -> Decimal:
    """Requests until the key's daily budget refuses one; what they cost in all."""
    until_budgeted(client)
    spent: list[tuple[int, Decimal]] = []
    while not spent or spent[-1][0] == 200:
        spent.append(ask(client, 20))
    assert spent[-1][0] == 402
    return sum((cost for _, cost in spent), Decimal(0))


def test_a_clock_run_a_day_ahead_cannot_make_a_day_s_budget_spendable_twice(
    tmp_path: Path, fake_upstream: FakeUpstream
):
    config = write_config(tmp_path, fake_upstream.base_url)
    wall = Gateway(config).start()
    try:
        wall.cli("team", "create", "drilled", "--credits", "100")
        secret = wall.cli("key", "create", "--team", "drilled").stdout.strip().splitlines()[-1]
        team = Team("drilled", secret)
        key_id = key_id_of(wall, team)
        with admin(wall) as api:
            assert (
                api.put(
                    f"/teams/{team.name}/keys/{key_id}/budget", json={"credits": "0.05", "period": "day"}
                ).status_code
                == 200
            )
        with openai.OpenAI(base_url=wall.base_url, api_key=team.key, max_retries=0) as client:
            today = spend_the_day(client)
    finally:
        wall.stop()

    drill = Gateway(config, env={"TOLLGATE_CLOCK_OFFSET": str(DAY), "TOLLGATE_CLOCK_DRILL": "1"}).start()
    try:
        assert "ahead of the wall clock" in drill.output()
        with openai.OpenAI(base_url=drill.base_url, api_key=team.key, max_retries=0) as client:
            tomorrow = spend_the_day(client)
    finally:
        drill.stop()

    again = Gateway(config).start()  # the wall clock again, the same day
    try:
        with openai.OpenAI(base_url=again.base_url, api_key=team.key, max_retries=0) as client:
            with pytest.raises(openai.APIStatusError) as refused:  # the request the drill's budget refused last
                client.chat.completions.create(model="fake-gpt", messages=ASK, max_tokens=20)
            assert refused.value.status_code == 402
            day_after = (datetime.now(UTC) + timedelta(days=2)).date().isoformat()
            assert refused.value.body["budget"]["resets_at"] == f"{day_after}T00:00:00+00:00"
            charges = again.charges(team.name)
            assert sum(-int(row["amount"]) for row in charges) == (today + tomorrow) * 1_000_000
            assert (today + tomorrow) <= 2 * Decimal("0.05")
            # The charges are in time order, whichever process recorded them.
            instants = [datetime.fromisoformat(row["occurred_at"]) for row in charges]
            assert instants == sorted(instants)
            key = plain_http.get(f"{again.base_url}/key", headers={"Authorization": f"Bearer {team.key}"}).json()[
                "data"
            ]
            assert Decimal(str(key["budget"]["spent"])) == tomorrow
            assert again.cli("ledger", "verify").returncode == 0
    finally:
        again.stop()
