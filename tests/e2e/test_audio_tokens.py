"""Transcriptions priced per token, through a real gateway with the official openai SDK: a WAV made
here, sent to a model priced like gpt-4o-transcribe (``audio_input = 6``, ``input = 2.5``, ``output =
10`` USD per million tokens) whose fake upstream reports its usage as OpenAI's does (``{"type":
"tokens", ...}``: 10 audio tokens a second, the prompt's words as text tokens, the transcript's words
as output tokens), whole and streamed; each answer's cost equal to its ledger charge to the micro-credit.

100 credits per USD: an audio token is 600 micro-credits, a text token in 250, a token out 1,000. The
hold is the file's seconds at 50 audio tokens a second, every prompt byte, and the model's 2,000
output tokens: 30,000 micro-credits a second plus 2,000,000.
"""

from __future__ import annotations

import io
import wave
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx2
import openai
import pytest
from openai.types.audio import TranscriptionTextDeltaEvent, TranscriptionTextDoneEvent
from openai.types.audio.transcription import UsageTokens

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import UPSTREAM_KEY, Gateway
from tests.support.teams import Team, Teams

pytestmark = pytest.mark.usefixtures("verified_at_the_end")

MICROS = Decimal(1_000_000)
AUDIO_TOKEN, TEXT_TOKEN, OUTPUT_TOKEN = 600, 250, 1_000


def wav(seconds: float, rate: int = 8000) -> bytes:
    """A WAV of silence ``seconds`` long (16-bit mono), made with the standard library."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\0\0" * round(rate * seconds))
    return buffer.getvalue()


def token_config(directory: Path, upstream: str) -> Path:
    from tests.support.backend import new_database_url

    config = directory / "tollgate.toml"
    config.write_text(
        f'database_url = "{new_database_url()}"\ncredits_per_usd = 100\nlease_idle_seconds = 0.3\n'
        f"""
[[models]]
id = "transcribe-tokens"
display_name = "gpt-4o-transcribe"
owned_by = "openai"
context_window = 16000
max_output_tokens = 2000
upstream = {{kind = "openai", base_url = "{upstream}", api_key_env = "UPSTREAM_KEY", model = "gpt-4o-transcribe"}}
endpoints = ["audio.transcriptions"]
pricing = {{audio_input = 6, input = 2.5, output = 10}}
"""
    )
    return config


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    started = Gateway(token_config(tmp_path_factory.mktemp("audio-tokens"), fake_upstream.base_url)).start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    opened = Teams(gateway.config)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def verified_at_the_end(gateway: Gateway) -> Iterator[None]:
    yield
    result = gateway.cli("ledger", "verify", check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def sdk() -> Iterator[list[openai.OpenAI]]:
    opened: list[openai.OpenAI] = []
    yield opened
    for client in opened:
        client.close()


def client(opened: list[openai.OpenAI], base_url: str, key: str) -> openai.OpenAI:
    opened.append(openai.OpenAI(base_url=base_url, api_key=key, max_retries=0))
    return opened[-1]


def micros(amount: object) -> int:
    exact = Decimal(str(amount)) * MICROS
    assert exact == exact.to_integral_value()
    return int(exact)


def charged(gateway: Gateway, team: Team) -> list[int]:
    return [-int(row["amount"]) for row in gateway.charges(team.name)]


def test_the_fake_streams_openais_transcription_events_to_the_official_sdk(
    fake_upstream: FakeUpstream, sdk: list[openai.OpenAI]
):
    """Called directly, the fake's stream parses as the SDK's own event types, the done event's usage
    as ``UsageTokens``: 3 s are 30 audio tokens, "Tollgate ledger" 2 text tokens, 5 words out."""
    direct = client(sdk, fake_upstream.base_url, UPSTREAM_KEY)
    with direct.audio.transcriptions.create(
        model="gpt-4o-transcribe", file=("a.wav", wav(3), "audio/wav"), prompt="Tollgate ledger", stream=True
    ) as events:
        received = list(events)
    deltas = [e for e in received if isinstance(e, TranscriptionTextDeltaEvent)]
    done = received[-1]
    assert isinstance(done, TranscriptionTextDoneEvent)
    assert "".join(d.delta for d in deltas) == done.text == "Transcribed 3 seconds of a.wav."
    assert done.usage is not None
    assert done.usage.type == "tokens"
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.total_tokens) == (32, 5, 37)
    assert done.usage.input_token_details is not None
    assert (done.usage.input_token_details.audio_tokens, done.usage.input_token_details.text_tokens) == (30, 2)
    whole = direct.audio.transcriptions.create(model="gpt-4o-transcribe", file=("b.wav", wav(1), "audio/wav"))
    assert isinstance(whole.usage, UsageTokens)


def test_a_transcription_is_charged_its_reported_tokens(
    gateway: Gateway, teams: Teams, fake_upstream: FakeUpstream, sdk: list[openai.OpenAI]
):
    """A 3.2 s WAV with the prompt "Tollgate, ledger": 4 s are 40 audio tokens (24,000), the prompt
    2 text tokens (500), "Transcribed 4 seconds of talk.wav." 5 tokens out (5,000): 29,500
    micro-credits, the answer's cost and the ledger's charge; the upstream's usage kept beside it."""
    team = teams.open("10")
    raw = client(sdk, gateway.base_url, team.key).audio.transcriptions.with_raw_response.create(
        model="transcribe-tokens", file=("talk.wav", wav(3.2), "audio/wav"), prompt="Tollgate, ledger"
    )
    answer = raw.parse()
    assert answer.text == "Transcribed 4 seconds of talk.wav."
    assert isinstance(answer.usage, UsageTokens)
    usage = answer.to_dict()["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (42, 5)
    expected = 40 * AUDIO_TOKEN + 2 * TEXT_TOKEN + 5 * OUTPUT_TOKEN
    assert expected == 29_500
    assert micros(usage["cost"]["credits"]) == expected
    assert usage["cost"]["breakdown"] == {
        "input": {"tokens": 2, "credits": 0.0005, "usd": 0.000005},
        "output": {"tokens": 5, "credits": 0.005, "usd": 0.00005},
        "audio_input": {"tokens": 40, "credits": 0.024, "usd": 0.00024},
    }
    assert micros(usage["remaining"]["credits"]) == 10_000_000 - expected
    assert micros(raw.headers["x-tollgate-cost"]) == expected
    assert charged(gateway, team) == [expected]
    sent = [r for r in fake_upstream.requests if r.path == "/v1/audio/transcriptions"][-1]
    assert (sent.body["model"], sent.body["prompt"]) == ("gpt-4o-transcribe", "Tollgate, ledger")


def test_a_text_transcription_is_asked_as_json_and_charged_its_tokens(
    gateway: Gateway, teams: Teams, fake_upstream: FakeUpstream, sdk: list[openai.OpenAI]
):
    """``response_format="text"``: the upstream is asked for JSON (whose usage says the tokens), the
    client gets the text as OpenAI writes it; 2 s are 20 audio tokens (12,000), 5 out (5,000)."""
    team = teams.open("10")
    raw = client(sdk, gateway.base_url, team.key).audio.transcriptions.with_raw_response.create(
        model="transcribe-tokens", file=("t.wav", wav(2), "audio/wav"), response_format="text"
    )
    assert raw.headers["content-type"].startswith("text/plain")
    assert raw.text == "Transcribed 2 seconds of t.wav.\n"
    assert micros(raw.headers["x-tollgate-cost"]) == 20 * AUDIO_TOKEN + 5 * OUTPUT_TOKEN == 17_000
    assert charged(gateway, team) == [17_000]
    sent = [r for r in fake_upstream.requests if r.path == "/v1/audio/transcriptions"][-1]
    assert sent.body["response_format"] == "json"


def test_a_streamed_transcription_is_charged_its_final_usage(gateway: Gateway, teams: Teams, sdk: list[openai.OpenAI]):
    """``stream=True``: the deltas come as the upstream sends them; the done event carries the
    usage, and in it the cost of the charge made from it: a 5.5 s WAV is 6 s, 60 audio tokens
    (36,000), 5 tokens out (5,000), 41,000 micro-credits, the ledger's charge."""
    team = teams.open("10")
    with client(sdk, gateway.base_url, team.key).audio.transcriptions.create(
        model="transcribe-tokens", file=("s.wav", wav(5.5), "audio/wav"), stream=True
    ) as events:
        received = list(events)
    done = received[-1]
    assert isinstance(done, TranscriptionTextDoneEvent)
    deltas = [e.delta for e in received if isinstance(e, TranscriptionTextDeltaEvent)]
    assert "".join(deltas) == done.text == "Transcribed 6 seconds of s.wav."
    assert len(deltas) == 5
    assert done.usage is not None
    assert done.usage.input_tokens == 60
    assert done.usage.output_tokens == 5
    usage = done.to_dict()["usage"]
    expected = 60 * AUDIO_TOKEN + 5 * OUTPUT_TOKEN
    assert micros(usage["cost"]["credits"]) == expected == 41_000
    assert micros(usage["remaining"]["credits"]) == 10_000_000 - expected
    assert charged(gateway, team) == [expected]
    gateway.wait_until_nothing_held(team.name)


def test_a_stream_the_upstream_breaks_off_is_not_charged(gateway: Gateway, teams: Teams, sdk: list[openai.OpenAI]):
    """The upstream breaks off after 2 events, before the one with the usage: the client has part of
    the transcript and an error, nothing is charged, nothing stays held."""
    team = teams.open("10")
    with (
        pytest.raises((openai.APIConnectionError, httpx2.RemoteProtocolError)),
        client(sdk, gateway.base_url, team.key).audio.transcriptions.create(
            model="transcribe-tokens", file=("b.wav", wav(2), "audio/wav"), prompt="[[drop-after:2]]", stream=True
        ) as events,
    ):
        list(events)
    gateway.wait_until_nothing_held(team.name)
    assert charged(gateway, team) == []


def test_the_hold_bounds_the_tokens_before_the_upstream_is_called(
    gateway: Gateway, teams: Teams, fake_upstream: FakeUpstream, sdk: list[openai.OpenAI]
):
    """2.1 credits cover 3 seconds' hold (3 × 30,000 + 2,000,000 = 2,090,000), not 4: a 9 s file is
    refused before the upstream is called, saying 3; a 3 s file is served and charged its tokens."""
    team = teams.open("2.1")
    sdk_client = client(sdk, gateway.base_url, team.key)
    with pytest.raises(openai.APIStatusError) as refused:
        sdk_client.audio.transcriptions.create(model="transcribe-tokens", file=("nine.wav", wav(9), "audio/wav"))
    assert refused.value.status_code == 402
    assert refused.value.response.headers["x-tollgate-affordable-audio-seconds"] == "3"
    assert [r for r in fake_upstream.requests if r.path.startswith("/v1/audio")] == []
    served = sdk_client.audio.transcriptions.create(model="transcribe-tokens", file=("three.wav", wav(3), "audio/wav"))
    assert micros(served.to_dict()["usage"]["cost"]["credits"]) == 30 * AUDIO_TOKEN + 5 * OUTPUT_TOKEN
    assert charged(gateway, team) == [23_000]


def test_an_idempotent_stream_is_charged_once_and_replayed(
    gateway: Gateway, teams: Teams, fake_upstream: FakeUpstream, sdk: list[openai.OpenAI]
):
    """The same streamed upload twice under one Idempotency-Key: the upstream called once, one charge
    (1 s: 10 audio tokens, 6,000, and 5 out, 5,000), the second answer the first's events replayed."""
    team = teams.open("10")
    sdk_client = client(sdk, gateway.base_url, team.key)
    audio = wav(1)
    answers = []
    for _ in range(2):
        with sdk_client.audio.transcriptions.with_streaming_response.create(
            model="transcribe-tokens",
            file=("once.wav", audio, "audio/wav"),
            stream=True,
            extra_headers={"Idempotency-Key": "stream-1"},
        ) as raw:
            answers.append((raw.headers.get("idempotent-replayed"), raw.read()))
    (first_replayed, first), (again_replayed, again) = answers
    assert (first_replayed, again_replayed) == (None, "true")
    assert again == first
    assert b'"transcript.text.done"' in first
    assert b'"cost"' in first
    assert charged(gateway, team) == [10 * AUDIO_TOKEN + 5 * OUTPUT_TOKEN]
    assert len([r for r in fake_upstream.requests if r.path == "/v1/audio/transcriptions"]) == 1


def test_a_stream_the_client_leaves_is_not_charged(gateway: Gateway, teams: Teams, fake_upstream: FakeUpstream):
    """The upstream sends an event every 200 ms; the client reads the first delta and hangs up: the
    hold is released, nothing charged (the transcript it asked for was never delivered)."""
    team = teams.open("10")
    with plain_http.Client(base_url=gateway.base_url, headers={"authorization": f"Bearer {team.key}"}) as http:
        form = {"model": "transcribe-tokens", "stream": "true", "prompt": "[[chunk-delay:200]]"}
        with http.stream("POST", "/audio/transcriptions", data=form, files={"file": ("l.wav", wav(2))}) as answer:
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/event-stream")
            assert b"transcript.text.delta" in next(answer.iter_bytes())
    gateway.wait_until_nothing_held(team.name)
    assert charged(gateway, team) == []
    assert [r.path for r in fake_upstream.requests] == ["/v1/audio/transcriptions"]
