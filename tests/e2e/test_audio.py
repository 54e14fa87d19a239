"""OpenAI's audio endpoints through a real gateway with the official openai SDK: transcriptions and
translations held and charged per second of the uploaded file (a WAV made here with ``wave``, an
MP3 made here frame by frame), speech held and charged per input character and streamed back, each
answer's reported cost equal to its ledger charge to the micro-credit.

100 credits per USD: whisper's 0.006 USD a minute is ``audio_second = 0.0001``, 0.01 credits, 10,000
micro-credits a second; tts-1's 15 USD per million characters is 1,500 micro-credits a character.
"""

from __future__ import annotations

import io
import warnings
import wave
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from tests.support import plain_http
from tests.support.fake_audio import SECONDS_PER_CHARACTER, speech_audio
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, UPSTREAM_KEY, Gateway
from tests.support.teams import Team, Teams

pytestmark = pytest.mark.usefixtures("verified_at_the_end")

MICROS = Decimal(1_000_000)


def wav(seconds: float, rate: int = 8000) -> bytes:
    """A WAV of silence ``seconds`` long (16-bit mono), made with the standard library."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\0\0" * round(rate * seconds))
    return buffer.getvalue()


def mp3(frames: int) -> bytes:
    """An MPEG-1 Layer III file of ``frames`` silent frames at 128 kbit/s, 44.1 kHz: each frame its
    4-byte header (sync, MPEG-1, layer III, no CRC, 128 kbit/s, 44.1 kHz, no padding, joint stereo)
    and 413 zero bytes (side information of zero length: silence), 417 bytes in all. Its duration
    is its bits over its bit rate: 200 frames are 200 × 417 × 8 / 128,000 = 5.2125 s."""
    return (bytes([0xFF, 0xFB, 0x90, 0x64]) + bytes(413)) * frames


def audio_config(directory: Path, upstream: str) -> Path:
    from tests.support.backend import new_database_url

    def model(model_id: str, name: str, endpoints: str, pricing: str) -> str:
        return f"""
[[models]]
id = "{model_id}"
display_name = "{model_id}"
owned_by = "openai"
context_window = 32000
max_output_tokens = 1
upstream = {{kind = "openai", base_url = "{upstream}", api_key_env = "UPSTREAM_KEY", model = "{name}"}}
endpoints = [{endpoints}]
[models.pricing]
{pricing}
"""

    config = directory / "tollgate.toml"
    config.write_text(
        f'database_url = "{new_database_url()}"\ncredits_per_usd = 100\nlease_idle_seconds = 0.3\n'
        "max_upload_bytes = 2000000\nmax_form_parts = 12\n"
        + model("whisper", "whisper-1", '"audio.transcriptions", "audio.translations"', "audio_second = 0.0001")
        + model("transcribe", "gpt-4o-transcribe", '"audio.transcriptions"', "audio_second = 0.0001")
        + model("tts", "tts-1", '"audio.speech"', "input_characters = 15")
        + model("chat-only", "gpt-x", '"chat.completions"', "input = 1\noutput = 1\ncache_create = 1\ncache_hit = 1")
    )
    return config


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    started = Gateway(audio_config(tmp_path_factory.mktemp("audio"), fake_upstream.base_url)).start()
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


_CLIENTS: list[openai.OpenAI] = []


@pytest.fixture(autouse=True)
def _clients_closed() -> Iterator[None]:
    yield
    while _CLIENTS:
        _CLIENTS.pop().close()


def client(base_url: str, key: str) -> openai.OpenAI:
    _CLIENTS.append(openai.OpenAI(base_url=base_url, api_key=key, max_retries=0))
    return _CLIENTS[-1]


def micros(amount: object) -> int:
    exact = Decimal(str(amount)) * MICROS
    assert exact == exact.to_integral_value()
    return int(exact)


def translate(sdk: openai.OpenAI, **kwargs: Any) -> Any:
    """``client.audio.translations.create``, which this SDK marks deprecated (OpenAI still serves it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return sdk.audio.translations.create(**kwargs)


def charged(gateway: Gateway, team: Team) -> list[int]:
    return [-int(row["amount"]) for row in gateway.charges(team.name)]


def test_the_fake_speaks_openais_audio_wire_to_the_official_sdk(fake_upstream: FakeUpstream):
    """The fake, called directly by the SDK: whisper-1 reports the seconds it heard, gpt-4o-transcribe
    its tokens, translations nothing; text answers are text; speech streams a WAV."""
    sdk = client(fake_upstream.base_url, UPSTREAM_KEY)
    heard = sdk.audio.transcriptions.create(model="whisper-1", file=("a.wav", wav(3.2), "audio/wav"))
    assert heard.text == "Transcribed 4 seconds of a.wav."
    assert heard.to_dict()["usage"] == {"type": "duration", "seconds": 4}
    tokens = sdk.audio.transcriptions.create(model="gpt-4o-transcribe", file=("b.mp3", mp3(200), "audio/mpeg"))
    usage = tokens.to_dict()["usage"]
    assert usage["type"] == "tokens"
    assert usage["input_token_details"] == {"audio_tokens": 60, "text_tokens": 0}
    text = sdk.audio.transcriptions.create(
        model="whisper-1", file=("c.wav", wav(1), "audio/wav"), response_format="text"
    )
    assert text == "Transcribed 1 seconds of c.wav.\n"
    translated = translate(sdk, model="whisper-1", file=("d.wav", wav(2.5), "audio/wav"))
    assert translated.text == "Translated 3 seconds of d.wav."
    with sdk.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input="Hello", response_format="wav"
    ) as spoken:
        assert spoken.headers["content-type"] == "audio/wav"
        assert spoken.read() == speech_audio(5)
    with pytest.raises(openai.BadRequestError):
        sdk.audio.transcriptions.create(model="whisper-1", file=("e.wav", b"not audio", "audio/wav"))


def test_a_wav_transcription_is_charged_per_second(gateway: Gateway, teams: Teams, fake_upstream: FakeUpstream):
    """A 3.2 s WAV: 4 seconds held and charged (whisper-1 reports 4) at 10,000 micro-credits each:
    40,000 micro-credits, 0.04 credits; the form reached the upstream whole, under its own name."""
    team = teams.open("10")
    sdk = client(gateway.base_url, team.key)
    audio = wav(3.2)
    raw = sdk.audio.transcriptions.with_raw_response.create(
        model="whisper", file=("talk.wav", audio, "audio/wav"), language="en", temperature=0.2
    )
    answer = raw.parse()
    assert answer.text == "Transcribed 4 seconds of talk.wav."
    usage = answer.to_dict()["usage"]
    assert usage["type"] == "duration"
    assert usage["seconds"] == 4
    assert micros(usage["cost"]["credits"]) == 40_000
    assert usage["cost"]["breakdown"] == {"audio_seconds": {"seconds": 4, "credits": 0.04, "usd": 0.0004}}
    assert micros(usage["remaining"]["credits"]) == 10_000_000 - 40_000
    assert raw.headers["x-tollgate-cost"] == "0.04"
    assert micros(raw.headers["x-tollgate-remaining"]) == 9_960_000
    assert charged(gateway, team) == [40_000]
    sent = [r for r in fake_upstream.requests if r.path == "/v1/audio/transcriptions"][-1]
    assert sent.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert int(sent.headers["content-length"]) > len(audio)
    assert "transfer-encoding" not in sent.headers


def test_an_mp3_is_read_from_its_own_frames(gateway: Gateway, teams: Teams):
    """200 MP3 frames are 5.2125 s: 6 seconds, 60,000 micro-credits, charged by the gateway's own
    count as gpt-4o-transcribe reports tokens, not seconds (its usage kept, the cost added)."""
    team = teams.open("10")
    answer = client(gateway.base_url, team.key).audio.transcriptions.create(
        model="transcribe", file=("clip.mp3", mp3(200), "audio/mpeg")
    )
    usage = answer.to_dict()["usage"]
    assert usage["type"] == "tokens"
    assert usage["input_token_details"]["audio_tokens"] == 60
    assert micros(usage["cost"]["credits"]) == 60_000
    assert charged(gateway, team) == [60_000]


def test_a_translation_without_usage_is_charged_the_files_seconds(gateway: Gateway, teams: Teams):
    """A 2.5 s WAV translated: whisper-1 reports no usage, so the 3 seconds read from the file are
    charged (30,000 micro-credits), in a usage made here."""
    team = teams.open("10")
    answer = translate(client(gateway.base_url, team.key), model="whisper", file=("fr.wav", wav(2.5), "audio/wav"))
    assert answer.text == "Translated 3 seconds of fr.wav."
    usage = answer.to_dict()["usage"]
    assert usage["seconds"] == 3
    assert micros(usage["cost"]["credits"]) == 30_000
    assert charged(gateway, team) == [30_000]


@pytest.mark.parametrize("fmt", ["text", "srt", "vtt"])
def test_a_text_answer_carries_its_cost_in_headers(gateway: Gateway, teams: Teams, fmt: str):
    """7 s as text, srt or vtt: the upstream's text as it came, 70,000 micro-credits in the headers."""
    team = teams.open("10")
    raw = client(gateway.base_url, team.key).audio.transcriptions.with_raw_response.create(
        model="whisper", file=("seven.wav", wav(7), "audio/wav"), response_format=fmt
    )
    assert raw.headers["content-type"].startswith("text/plain")
    assert "Transcribed 7 seconds of seven.wav." in raw.text
    assert micros(raw.headers["x-tollgate-cost"]) == 70_000
    assert Decimal(raw.headers["x-tollgate-cost-usd"]) == Decimal("0.0007")
    assert micros(raw.headers["x-tollgate-remaining"]) == 10_000_000 - 70_000
    assert charged(gateway, team) == [70_000]


def test_speech_is_streamed_and_charged_per_character(gateway: Gateway, teams: Teams):
    """ "Good morning, Tollgate." is 23 characters at 1,500 micro-credits: 34,500, in the headers
    before the audio; the audio is the upstream's, byte for byte, and charged once it all went out."""
    team = teams.open("10")
    text = "Good morning, Tollgate."
    sdk = client(gateway.base_url, team.key)
    with sdk.audio.speech.with_streaming_response.create(
        model="tts", voice="alloy", input=text, response_format="wav"
    ) as spoken:
        assert spoken.headers["content-type"] == "audio/wav"
        assert micros(spoken.headers["x-tollgate-cost"]) == 34_500
        assert micros(spoken.headers["x-tollgate-remaining"]) == 10_000_000 - 34_500
        received = b"".join(spoken.iter_bytes())
    assert received == speech_audio(len(text))
    assert len(received) > 8000 * 2 * SECONDS_PER_CHARACTER * len(text)
    assert charged(gateway, team) == [34_500]


def test_speech_cut_off_by_the_upstream_is_not_charged(gateway: Gateway, teams: Teams):
    """The upstream breaks off after 2 chunks: the client has part of the audio, nothing is charged."""
    team = teams.open("10")
    sdk = client(gateway.base_url, team.key)
    with (
        pytest.raises(httpx2.RemoteProtocolError, match="incomplete"),
        sdk.audio.speech.with_streaming_response.create(
            model="tts", voice="alloy", input="a long sentence [[drop-after:2]]" * 4, response_format="wav"
        ) as spoken,
    ):
        b"".join(spoken.iter_bytes())
    gateway.wait_until_nothing_held(team.name)
    assert charged(gateway, team) == []


def test_bad_uploads_are_refused_and_nothing_is_charged(gateway: Gateway, teams: Teams, fake_upstream: FakeUpstream):
    """Not audio, a file over max_upload_bytes, too many parts, a missing file, a model that does not
    serve the endpoint: each refused in OpenAI's shape, the upstream never called, nothing held."""
    team = teams.open("10")
    sdk = client(gateway.base_url, team.key)
    with pytest.raises(openai.BadRequestError) as unreadable:
        sdk.audio.transcriptions.create(model="whisper", file=("x.wav", b"RIFF not really a wav", "audio/wav"))
    assert "could not be read" in unreadable.value.message
    assert unreadable.value.param == "file"  # type: ignore[attr-defined]
    with pytest.raises(openai.APIStatusError) as large:
        sdk.audio.transcriptions.create(model="whisper", file=("big.wav", wav(130), "audio/wav"))
    assert large.value.status_code == 413
    assert "at most 2000000 bytes" in large.value.message
    with pytest.raises(openai.BadRequestError) as parts:
        sdk.audio.transcriptions.create(
            model="whisper",
            file=("a.wav", wav(1), "audio/wav"),
            extra_body={f"x{i}": "y" for i in range(20)},
        )
    assert "too many parts" in parts.value.message
    posted = plain_http.post(
        f"{gateway.base_url}/audio/transcriptions",
        headers={"authorization": f"Bearer {team.key}"},
        data={"model": "whisper"},
        files={"other": ("a.txt", b"x", "text/plain")},
    )
    assert posted.status_code == 400
    assert posted.json()["error"]["param"] in ("file", "other")
    with pytest.raises(openai.NotFoundError):
        sdk.audio.transcriptions.create(model="chat-only", file=("a.wav", wav(1), "audio/wav"))
    with pytest.raises(openai.NotFoundError):
        sdk.audio.speech.create(model="whisper", voice="alloy", input="hi")
    assert [r for r in fake_upstream.requests if r.path.startswith("/v1/audio")] == []
    gateway.wait_until_nothing_held(team.name)
    assert charged(gateway, team) == []


def test_a_team_that_cannot_afford_the_seconds_gets_402(gateway: Gateway, teams: Teams, fake_upstream: FakeUpstream):
    """0.05 credits cover 5 seconds: a 9 s file is refused before the upstream, saying so."""
    team = teams.open("0.05")
    with pytest.raises(openai.APIStatusError) as refused:
        client(gateway.base_url, team.key).audio.transcriptions.create(
            model="whisper", file=("nine.wav", wav(9), "audio/wav")
        )
    assert refused.value.status_code == 402
    assert refused.value.response.headers["x-tollgate-affordable-audio-seconds"] == "5"
    assert [r for r in fake_upstream.requests if r.path.startswith("/v1/audio")] == []


def test_an_idempotent_transcription_is_charged_once(gateway: Gateway, teams: Teams, fake_upstream: FakeUpstream):
    """The same upload twice under one Idempotency-Key: one charge, the stored answer replayed."""
    team = teams.open("10")
    sdk = client(gateway.base_url, team.key)
    audio = wav(2)
    first = sdk.audio.transcriptions.with_raw_response.create(
        model="whisper", file=("same.wav", audio, "audio/wav"), extra_headers={"Idempotency-Key": "upload-1"}
    )
    again = sdk.audio.transcriptions.with_raw_response.create(
        model="whisper", file=("same.wav", audio, "audio/wav"), extra_headers={"Idempotency-Key": "upload-1"}
    )
    assert again.headers["idempotent-replayed"] == "true"
    assert again.text == first.text
    assert charged(gateway, team) == [20_000]
    assert len([r for r in fake_upstream.requests if r.path == "/v1/audio/transcriptions"]) == 1
    lookup = plain_http.get(
        f"{gateway.base_url}/requests/{first.headers['x-request-id']}",
        headers={"authorization": f"Bearer {team.key}"},
    ).json()["data"]
    assert lookup["endpoint"] == "audio.transcriptions"
    assert lookup["charged_micros"] == 20_000


def test_the_demo_upstream_transcribes_and_speaks(tmp_path: Path):
    """examples/demo.toml's audio models on the built-in demo upstream: a 2 s WAV transcribed (2 s at
    its 0.0001 USD a second: 20,000 micro-credits) and 10 characters spoken (15 USD per million:
    15,000 micro-credits), each charged what it reported."""
    from tests.support.backend import new_database_url

    example = Path(__file__).resolve().parents[2] / "examples" / "demo.toml"
    config = tmp_path / "demo.toml"
    config.write_text(example.read_text().replace('"sqlite:///demo.db"', f'"{new_database_url()}"'))
    demo = Gateway(config).start()
    teams = Teams(config)
    try:
        team = teams.open("10")
        sdk = client(demo.base_url, team.key)
        heard = sdk.audio.transcriptions.create(model="demo-whisper", file=("hello.wav", wav(2), "audio/wav"))
        assert heard.text == "The Tollgate demo transcribed 2 seconds of hello.wav."
        assert micros(heard.to_dict()["usage"]["cost"]["credits"]) == 20_000
        with sdk.audio.speech.with_streaming_response.create(
            model="demo-tts", voice="alloy", input="Hello demo", response_format="wav"
        ) as spoken:
            assert micros(spoken.headers["x-tollgate-cost"]) == 15_000
            audio = spoken.read()
        with wave.open(io.BytesIO(audio)) as w:
            assert w.getnframes() == round(8000 * 0.05 * 10)
        assert sorted(charged(demo, team)) == [15_000, 20_000]
        assert demo.cli("ledger", "verify", check=False).returncode == 0
    finally:
        teams.close()
        demo.stop()


def test_a_key_restricted_to_speech_may_not_transcribe(gateway: Gateway, fake_upstream: FakeUpstream):
    """A key whose endpoints are `audio.speech` only: speaking is served, transcribing is a 403 that
    names the endpoint, before the file is read or anything held; the metrics count both by endpoint."""
    gateway.cli("team", "create", "speech-only", "--credits", "5")
    key = gateway.cli("key", "create", "--team", "speech-only", "--endpoints", "audio.speech").stdout.splitlines()[-1]
    sdk = client(gateway.base_url, key)
    with sdk.audio.speech.with_streaming_response.create(model="tts", voice="alloy", input="hi") as spoken:
        assert spoken.read()
    with pytest.raises(openai.PermissionDeniedError) as refused:
        sdk.audio.transcriptions.create(model="whisper", file=("a.wav", wav(1), "audio/wav"))
    assert "/v1/audio/transcriptions" in refused.value.message
    assert [r.path for r in fake_upstream.requests] == ["/v1/audio/speech"]
    metrics = plain_http.get(gateway.root_url + "/metrics", headers={"authorization": f"Bearer {ADMIN_KEY}"}).text
    assert 'endpoint="audio.speech"' in metrics
    assert 'endpoint="audio.transcriptions"' in metrics


HOSTILE_FORMS = [
    (
        b"multipart/form-data; boundary=b",
        b'--b\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nRIFF',
    ),
    (b"multipart/form-data; boundary=b", b"--b\r\n" + b"X" * 10_000 + b"\r\n\r\nx\r\n--b--\r\n"),
    (b"multipart/form-data; boundary=b", b'--b\r\nContent-Disposition: form-data; name="a"\r\n\r\nx\r\n' * 500),
    (b"multipart/form-data; boundary=b", b"".join(b"--b\r\nH%d: v\r\n" % i for i in range(50)) + b"\r\nx\r\n--b--\r\n"),
    (b"multipart/form-data; boundary=" + b"b" * 2000, b"--" + b"b" * 2000 + b"--\r\n"),
    (b"multipart/form-data; boundary=b", b"--b--\r\n"),
    (b"multipart/form-data; boundary=b", b"\xff\xfe" * 1000),
    (b'multipart/form-data; boundary=""', b"--\r\n"),
    (b"text/plain", b"hello"),
    (
        b"multipart/form-data; boundary=b",
        b'--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper\r\n'
        b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n'
        + wav(1)[:30]
        + b"\r\n--b--\r\n",
    ),
]


@pytest.mark.parametrize("path", ["/audio/transcriptions", "/audio/translations", "/audio/speech"])
def test_hostile_bodies_get_a_clear_4xx_never_a_5xx(gateway: Gateway, teams: Teams, path: str):
    """Truncated, oversized, malformed and mistyped bodies: each a 4xx in OpenAI's shape, nothing held."""
    team = teams.open("1")
    with plain_http.Client(base_url=gateway.base_url, headers={"authorization": f"Bearer {team.key}"}) as http:
        for content_type, body in HOSTILE_FORMS:
            answer = http.post(path, content=body, headers={"content-type": content_type.decode("latin-1")})
            assert 400 <= answer.status_code < 500, (content_type, body[:60], answer.status_code, answer.text)
            assert answer.json()["error"]["message"]
    gateway.wait_until_nothing_held(team.name)
    assert charged(gateway, team) == []


def test_speech_the_client_leaves_is_not_charged(gateway: Gateway, teams: Teams):
    """4,000 characters make 3.2 MB of audio, made as it is spoken (10 ms a 4 KB chunk: 8 s); the
    client reads its first bytes and hangs up: the hold (6,000,000 micro-credits) is released,
    nothing charged. (Made at once, the whole answer could fit in the sockets' buffers before a
    client starved of CPU got to hang up: delivered, as far as any server can tell.)"""
    team = teams.open("10")
    pace = "[[chunk-delay:10]]"
    request = {"model": "tts", "voice": "alloy", "input": pace + "x" * (4000 - len(pace)), "response_format": "wav"}
    with (
        plain_http.Client(base_url=gateway.base_url, headers={"authorization": f"Bearer {team.key}"}) as http,
        http.stream("POST", "/audio/speech", json=request) as answer,
    ):
        assert answer.status_code == 200
        assert micros(answer.headers["x-tollgate-cost"]) == 6_000_000
        assert next(answer.iter_bytes())
    gateway.wait_until_nothing_held(team.name)
    assert charged(gateway, team) == []
