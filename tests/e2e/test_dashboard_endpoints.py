"""The dashboard's usage by endpoint: a team's spend on every endpoint the gateway bills — chat,
embeddings, images, audio transcriptions, translations and speech, and a batch's lines — made here
through the official openai SDK, then read from ``/dashboard/api/teams/{name}/usage`` over plain
HTTP: each endpoint under its name, label and path, its requests and credits equal to the ledger's
charges of that endpoint, to the micro-credit, and adding up to every charge of the team."""

from __future__ import annotations

import io
import json
import time
import warnings
import wave
from collections.abc import Iterator
from decimal import Decimal

import openai
import pytest

from tests.support import plain_http
from tests.support.embeddings_models import embeddings_model
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway, write_config
from tests.support.spend_models import spend_models
from tests.support.teams import Team, Teams

BATCH_MODEL = """
[[models]]
id = "batch-gpt"
display_name = "Batch GPT"
owned_by = "acme"
context_window = 8192
max_output_tokens = 1024
pricing = {{input = 2.5, output = 10, cache_create = 3.125, cache_hit = 1.25, batch_discount = 0.5}}
upstream = {{kind = "openai", base_url = "{base}", api_key_env = "UPSTREAM_KEY", model = "gpt-x"}}
"""
#: Every endpoint the traffic below spends on, and how the dashboard labels it.
LABELS = {
    "chat.completions": ("Chat completions", "/v1/chat/completions"),
    "embeddings": ("Embeddings", "/v1/embeddings"),
    "images.generations": ("Image generations", "/v1/images/generations"),
    "audio.transcriptions": ("Audio transcriptions", "/v1/audio/transcriptions"),
    "audio.translations": ("Audio translations", "/v1/audio/translations"),
    "audio.speech": ("Speech", "/v1/audio/speech"),
    "batches": ("Batches", "/v1/batches"),
}


def wav(seconds: float) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\0\0" * round(8000 * seconds))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    base = fake_upstream.base_url
    settings = (
        "batch_poll_seconds = 0.2\n" + spend_models(base) + embeddings_model(base) + BATCH_MODEL.format(base=base)
    )
    started = Gateway(write_config(tmp_path_factory.mktemp("dashboard-endpoints"), base, settings=settings)).start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    opened = Teams(gateway.config)
    yield opened
    opened.close()


def _batch(sdk: openai.OpenAI) -> None:
    """Two lines of a chat batch, polled to completion (each line charged under ``batches``)."""
    lines = [
        {
            "custom_id": f"line-{n}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "batch-gpt", "max_tokens": 20, "messages": [{"role": "user", "content": "w " * n}]},
        }
        for n in (1, 2)
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode() + b"\n"
    file_id = sdk.files.create(file=("batch.jsonl", io.BytesIO(data)), purpose="batch").id
    batch = sdk.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    deadline = time.monotonic() + 30
    while sdk.batches.retrieve(batch.id).status != "completed":
        assert time.monotonic() < deadline, "the batch did not complete"
        time.sleep(0.1)


def _spend_everywhere(gateway: Gateway, team: Team) -> None:
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as sdk:
        sdk.chat.completions.create(model="fake-gpt", messages=[{"role": "user", "content": "Hello"}], max_tokens=10)
        sdk.embeddings.create(model="fake-embedding", input=["one", "two"])
        sdk.images.generate(model="fuzz-dalle", prompt="a fox", response_format="b64_json")
        sdk.audio.transcriptions.create(model="fuzz-whisper", file=("a.wav", wav(2), "audio/wav"))
        with warnings.catch_warnings():  # this SDK marks translations deprecated; OpenAI still serves them
            warnings.simplefilter("ignore", DeprecationWarning)
            sdk.audio.translations.create(model="fuzz-whisper", file=("b.wav", wav(1), "audio/wav"))
        with sdk.audio.speech.with_streaming_response.create(model="fuzz-tts", voice="alloy", input="Hi") as spoken:
            assert spoken.read()
        _batch(sdk)


def _usage(gateway: Gateway, team: Team, key: str) -> dict:
    root = gateway.base_url.removesuffix("/v1")
    answer = plain_http.get(f"{root}/dashboard/api/teams/{team.name}/usage", headers={"authorization": f"Bearer {key}"})
    assert answer.status_code == 200, answer.text
    return json.loads(answer.text, parse_float=Decimal)


def test_usage_by_endpoint_shows_every_billed_endpoint_as_the_ledger_charged_it(gateway: Gateway, teams: Teams):
    team = teams.open("100")
    _spend_everywhere(gateway, team)
    gateway.wait_until_nothing_held(team.name)
    charges = gateway.charges(team.name)
    ledger: dict[str, list[int]] = {}
    for row in charges:
        ledger.setdefault(row["endpoint"], []).append(-int(row["amount"]))
    assert set(ledger) == set(LABELS)
    assert len(ledger["batches"]) == 2

    usage = _usage(gateway, team, team.key)
    rows = {row["endpoint"]: row for row in usage["by_endpoint"]}
    assert set(rows) == set(LABELS)
    for endpoint, (label, path) in LABELS.items():
        row = rows[endpoint]
        assert (row["label"], row["path"]) == (label, path)
        assert row["requests"] == len(ledger[endpoint])
        assert row["cost"] * 1_000_000 == sum(ledger[endpoint]), endpoint
        assert row["cost"] > 0, endpoint
    costs = [row["cost"] for row in usage["by_endpoint"]]
    assert costs == sorted(costs, reverse=True)  # the largest spend first
    assert sum(costs) == sum(m["cost"] for m in usage["by_model"])
    assert rows["embeddings"]["input_tokens"] > 0
    assert rows["embeddings"]["output_tokens"] == 0
    assert _usage(gateway, team, ADMIN_KEY)["by_endpoint"] == usage["by_endpoint"]


def test_a_team_without_charges_has_no_usage_by_endpoint(gateway: Gateway, teams: Teams):
    team = teams.open("1")
    assert _usage(gateway, team, team.key)["by_endpoint"] == []
