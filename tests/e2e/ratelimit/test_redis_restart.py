"""Redis restarted under a running gateway: the connections its pool kept are dead, and the first
use of each fails. The gateway must reconnect, not answer 503 — Redis is answering again — for as
long as stale connections are left in its pool (the chaos suite found them up to a minute later);
only a Redis that does not answer means 503."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from scripts.chaos.clusters import RedisServer
from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Teams

PARALLEL = 12  # requests at once: the pool keeps a connection for each


async def test_after_a_redis_restart_a_limited_key_is_served_on_fresh_connections(
    tmp_path: Path, fake_upstream: FakeUpstream
):
    redis = RedisServer(tmp_path)  # a Redis of the test's own: restarting the machine's would disturb others
    redis.start()
    gateway = Gateway(write_config(tmp_path, fake_upstream.base_url, settings=f'redis_url = "{redis.url}"')).start()
    try:
        teams = Teams(gateway.config)
        team = teams.open("100")
        teams.close()
        gateway.cli("key", "limit", "--team", team.name, key_id(gateway, team.name), "--rpm", "100000")
        body = {"model": "fake-gpt", "max_tokens": 5, "messages": [{"role": "user", "content": "hi [[latency:100]]"}]}
        headers = {"authorization": f"Bearer {team.key}"}

        async def burst(http: httpx.AsyncClient) -> list[int]:
            answers = await asyncio.gather(
                *(
                    http.post(gateway.base_url + "/chat/completions", json=body, headers=headers)
                    for _ in range(PARALLEL)
                )
            )
            return [a.status_code for a in answers]

        async with plain_http.AsyncClient(timeout=30) as http:
            assert await burst(http) == [200] * PARALLEL  # the pool now holds a connection per request
            redis.restart()
            assert await burst(http) == [200] * PARALLEL
            assert not [
                line for line in gateway.log_lines() if "rate-limit store unavailable" in line.get("message", "")
            ]
            redis.stop()  # and a Redis that is gone still means the documented, retryable 503
            gone = await http.post(gateway.base_url + "/chat/completions", json=body, headers=headers)
            assert gone.status_code == 503
            assert "Rate limits cannot be checked" in gone.json()["error"]["message"]
    finally:
        gateway.stop()
        redis.stop()


def key_id(gateway: Gateway, team: str) -> str:
    return gateway.cli("key", "list", "--team", team).stdout.split()[0]
