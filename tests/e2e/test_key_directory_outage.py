"""A key the gateway has not seen yet, presented while its database refuses connections: the key
cannot be looked up, so the answer is the documented, retryable 503 of a database outage in the
endpoint's own shape — not a 500 — and the key works as soon as the database is back.

The database really refuses connections; this runs on PostgreSQL whatever the suite's backend (on
SQLite reads go on while the write lock is held, so a lookup never fails there)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support import plain_http
from tests.support.backend import new_postgres_database_url
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.outages import database_stopped, wait_for
from tests.support.teams import Teams


async def test_a_key_not_yet_seen_while_the_database_refuses_connections_gets_503(
    tmp_path: Path, fake_upstream: FakeUpstream
):
    gateway = Gateway(write_config(tmp_path, fake_upstream.base_url, database=new_postgres_database_url())).start()
    try:
        teams = Teams(gateway.config)
        team = teams.open("100")
        teams.close()
        ask = [{"role": "user", "content": "hello"}]
        chat = {"model": "fake-gpt", "messages": ask}
        messages = {"model": "fake-claude", "max_tokens": 20, "messages": ask}
        async with plain_http.AsyncClient(timeout=60) as http:
            with database_stopped(gateway):
                answers = await asyncio.gather(
                    http.post(
                        gateway.base_url + "/chat/completions",
                        json=chat,
                        headers={"authorization": f"Bearer {team.key}"},
                    ),
                    http.post(
                        gateway.root_url + "/v1/messages",
                        json=messages,
                        headers={"x-api-key": team.key, "anthropic-version": "2023-06-01"},
                    ),
                )
            chat_answer, messages_answer = answers
            assert chat_answer.status_code == 503, chat_answer.text
            assert chat_answer.json()["error"]["type"] == "server_error"
            assert "database" in chat_answer.json()["error"]["message"]
            assert chat_answer.headers["x-should-retry"] == "true"
            assert messages_answer.status_code == 503, messages_answer.text
            assert messages_answer.json()["type"] == "error"  # the Messages endpoint's own shape
            assert fake_upstream.requests == []

            wait_for(lambda: plain_http.get(gateway.root_url + "/health/ready").status_code == 200)
            served = await http.post(
                gateway.base_url + "/chat/completions", json=chat, headers={"authorization": f"Bearer {team.key}"}
            )
            assert served.status_code == 200, served.text
        assert not [line for line in gateway.log_lines() if line.get("message") == "unhandled error"]
    finally:
        gateway.stop()
