"""Several gateway processes on one ledger, hundreds of concurrent requests, one team that can
afford only some of them: nothing overspent, every answered request charged exactly once."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import openai

from tests.support.backend import BACKEND
from tests.support.charges import balance_of
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Teams

PROCESSES = 3 if BACKEND == "postgresql" else 1


async def test_concurrent_requests_across_gateway_processes_never_overspend(tmp_path, fake_upstream: FakeUpstream):
    config = write_config(tmp_path, fake_upstream.base_url, redis=True)
    gateways = [Gateway(config).start() for _ in range(PROCESSES)]
    try:
        teams = Teams(config)
        team = teams.open("0.5")  # ~40 worst-case holds at max_tokens=10; the real cost is far lower
        teams.close()
        clients = [openai.AsyncOpenAI(base_url=g.base_url, api_key=team.key, max_retries=0) for g in gateways]

        async def one(i: int):
            client = clients[i % len(clients)]
            try:
                return await client.chat.completions.create(
                    model="fake-gpt", max_tokens=10, messages=[{"role": "user", "content": f"request number {i}"}])
            except openai.APIStatusError as exc:
                return exc.status_code

        results = await asyncio.gather(*(one(i) for i in range(300)))
        for client in clients:
            await client.close()

        served = [r for r in results if not isinstance(r, int)]
        refused = [r for r in results if isinstance(r, int)]
        assert set(refused) <= {402}, refused
        assert served
        assert refused
        charged = sum(Decimal(str(r.usage.model_extra["cost"]["credits"])) for r in served)
        # Every answered request is in the ledger exactly once, and nothing else is.
        assert len(fake_upstream.requests) == len(served)
        gateways[0].wait_until_nothing_held(team.name)  # every request settled, every lease given back
        assert balance_of(gateways[0], team.name) == Decimal("0.5") - charged
        assert min(Decimal(str(r.usage.model_extra["remaining"]["credits"])) for r in served) >= 0
        verify = gateways[0].cli("ledger", "verify")
        assert verify.returncode == 0
        assert f"{len(served)} charges" in verify.stdout
    finally:
        for g in gateways:
            g.stop()
