"""Several gateway processes on one ledger, hundreds of concurrent requests, one team that can
afford only some of them: nothing overspent, every answered request charged exactly once."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal

import openai

from app.store.writer_lock import WriterLock
from domain.ledger import team_id
from tests.support.backend import BACKEND, RawDatabase
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
        # 300 connections opened at once from one event loop: on a loaded machine the SDK's default 5 s
        # to connect ran out once in the full suite (the test's loop starved, not the gateways)
        clients = [
            openai.AsyncOpenAI(base_url=g.base_url, api_key=team.key, max_retries=0, timeout=60) for g in gateways
        ]

        async def one(i: int):
            client = clients[i % len(clients)]
            try:
                return await client.chat.completions.create(
                    model="fake-gpt", max_tokens=10, messages=[{"role": "user", "content": f"request number {i}"}]
                )
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


async def test_gateway_processes_write_different_teams_side_by_side_and_see_a_top_up_made_meanwhile(
    tmp_path, fake_upstream: FakeUpstream
):
    """Two gateway processes on one ledger, each serving many teams. While another process holds the
    writer lock of one team (as a gateway does in the middle of a batch), the other teams' requests
    are charged without waiting for it (PostgreSQL: one lock per team) and that team's wait; a top-up
    made with the CLI during the load is seen; every request is charged exactly once."""
    config = write_config(tmp_path, fake_upstream.base_url, redis=True)
    gateways = [Gateway(config).start() for _ in range(2)]
    lock = WriterLock(RawDatabase.of_config(config).db)
    try:
        teams = Teams(config)
        opened = [teams.open("5") for _ in range(6)]
        teams.close()
        # Client 2 i + j: team i through gateway j.
        clients = [
            openai.AsyncOpenAI(base_url=g.base_url, api_key=t.key, max_retries=0, timeout=30)
            for t in opened
            for g in gateways
        ]

        async def ask(client: int, text: str) -> tuple[int, Decimal]:
            answer = await clients[client].chat.completions.create(
                model="fake-gpt", max_tokens=10, messages=[{"role": "user", "content": text}]
            )
            return client // 2, Decimal(str(answer.usage.model_extra["cost"]["credits"]))

        served = list(await asyncio.gather(*(ask(c, "warm up") for c in range(len(clients)))))  # leases in place

        with lock.held([team_id(opened[0].name)]) as held:
            assert held
            locked = [asyncio.ensure_future(ask(j, f"locked team, gateway {j}")) for j in (0, 1)]
            others = asyncio.gather(*(ask(c, "another team") for c in range(2, len(clients))))
            if BACKEND == "postgresql":
                started = time.monotonic()
                served += await asyncio.wait_for(others, timeout=10)
                assert time.monotonic() - started < 2.5  # never waited for team 0's lock (that gives up at 5 s)
                await asyncio.sleep(0.3)
                assert not any(f.done() for f in locked)  # team 0's charges wait for it
            else:  # SQLite: one lock for the whole file, so everybody waits
                await asyncio.sleep(0.5)
                assert not others.done()
        served += await asyncio.gather(*locked)
        if BACKEND != "postgresql":
            served += await others

        # Load on every team through both processes, and a top-up of team 1 from the CLI meanwhile.
        load = asyncio.gather(*(ask(i % len(clients), f"load {i}") for i in range(240)))
        await asyncio.sleep(0.2)
        await asyncio.to_thread(gateways[0].cli, "credits", "add", "--team", opened[1].name, "7")
        served += await load
        for client in clients:
            await client.close()

        assert len(fake_upstream.requests) == len(served)
        for i, team in enumerate(opened):
            gateways[0].wait_until_nothing_held(team.name)  # every request settled, every lease given back
            charged = sum((cost for t, cost in served if t == i), Decimal(0))
            assert balance_of(gateways[0], team.name) == Decimal(5) + (7 if i == 1 else 0) - charged
        verify = gateways[0].cli("ledger", "verify")
        assert verify.returncode == 0
        assert f"{len(served)} charges" in verify.stdout
    finally:
        lock.close()
        for g in gateways:
            g.stop()
