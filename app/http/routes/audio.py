"""OpenAI's audio endpoints, billed to the caller's team.

- ``POST /v1/audio/transcriptions`` and ``/v1/audio/translations``: a multipart/form-data upload
  (``file``, ``model``, ``language``, ``prompt``, ``response_format``, ``temperature``,
  ``timestamp_granularities[]``, ...), read as it arrives within the limits (``app/http/multipart.py``;
  a file at most 25 MiB, as OpenAI takes), its duration read from the file's header, then held for
  those seconds (or the tokens they may come to, for a model priced per token) and sent upstream as
  a stream (``app/http/audio_call.py``, ``app/http/transcripts.py``); a transcription asked for
  with ``stream=true`` is relayed as the upstream's server-sent events.
- ``POST /v1/audio/speech``: a JSON body (``model``, ``input``, ``voice``, ``response_format``,
  ``speed``, ``instructions``), held for the input's characters, the audio relayed as it comes.

Every field Tollgate does not judge goes upstream untouched; those it judges are checked here with
OpenAI's own limits, so a request the provider would refuse is refused before anything is held.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, post

from app.audio_duration import audio_seconds
from app.errors import InvalidRequest
from app.http.audio_call import AudioAsk, Outgoing, serve_speech
from app.http.event_stream import EventStream
from app.http.multipart import Form, FormLimits, read_form
from app.http.routes.auth import authenticate, authorize
from app.http.routes.request_body import read_json_object, require
from app.http.routes.served import served_model
from app.http.transcripts import serve_transcription, serve_transcription_stream
from app.runtime import Runtime
from domain import endpoints
from domain.audio_pricing import Heard
from domain.usage import TokenUsage

#: The largest audio file OpenAI takes (25 MB); ``max_upload_bytes`` may lower it.
AUDIO_FILE_BYTES = 25 * 1024 * 1024
RESPONSE_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
GRANULARITIES = ("word", "segment")
#: Speech: the longest input (characters), its audio formats and its speed range (OpenAI's).
MAX_SPEECH_INPUT = 4096
SPEECH_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
SPEED_RANGE = (0.25, 4.0)


def _number(form: Form, name: str, low: float, high: float) -> None:
    value = form.value(name)
    if value is None:
        return
    try:
        number = float(value)
    except ValueError:
        raise InvalidRequest(f"Invalid '{name}': expected a number, but got {value!r}.", param=name) from None
    if not low <= number <= high:
        raise InvalidRequest(f"Invalid '{name}': expected a value between {low:g} and {high:g}.", param=name)


def check_transcription(form: Form, streams: bool = False) -> dict[str, str]:
    """The form's text fields, once the ones Tollgate judges check out (400 naming the field);
    ``streams``: the endpoint may be asked for a stream (transcriptions; translations are never streamed)."""
    if len(form.files("file")) != 1:
        raise InvalidRequest("Missing required parameter: 'file' (one audio file).", param="file")
    stray = sorted({part.name for part in form.parts if part.name != "file" and form.file(part.name)})
    if stray:
        raise InvalidRequest(f"Unexpected file in field '{stray[0]}': only 'file' takes a file.", param=stray[0])
    model = form.value("model")
    if not model:
        raise InvalidRequest("Missing required parameter: 'model'.", param="model")
    fmt = form.value("response_format")
    if fmt is not None and fmt not in RESPONSE_FORMATS:
        raise InvalidRequest(
            f"Invalid 'response_format': {fmt!r}; expected one of {', '.join(RESPONSE_FORMATS)}.",
            param="response_format",
        )
    _number(form, "temperature", 0, 1)
    for granularity in form.values("timestamp_granularities[]"):
        if granularity not in GRANULARITIES:
            raise InvalidRequest(
                f"Invalid 'timestamp_granularities[]': {granularity!r}; expected 'word' or 'segment'.",
                param="timestamp_granularities[]",
            )
    stream = (form.value("stream") or "false").lower()
    if stream not in ("true", "false"):
        raise InvalidRequest(f"Invalid 'stream': expected true or false, but got {stream!r}.", param="stream")
    if stream == "true" and not streams:
        raise InvalidRequest("Translations are not streamed; leave 'stream' out.", param="stream")
    return {part.name: part.value for part in form.parts if not form.file(part.name) and hasattr(part, "value")}


async def _transcribe(request: Request[Any, Any, Any], endpoint: str, path: str) -> Response[bytes] | EventStream:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    with await read_form(request, FormLimits.of(runtime.settings, AUDIO_FILE_BYTES)) as form:
        fields = check_transcription(form, streams=endpoint == endpoints.AUDIO_TRANSCRIPTIONS)
        streamed = fields.get("stream", "false").lower() == "true"
        model = served_model(runtime.settings, fields["model"], endpoint)
        authorize(principal, model.id, endpoint)
        upload = form.file("file")
        assert upload is not None  # checked above
        seconds = await audio_seconds(upload.opened())
        ask = AudioAsk(
            principal=principal,
            model=model,
            endpoint=endpoint,
            fields=fields,
            digest=form.digest(),
            usage=TokenUsage(audio_seconds=seconds),
            outgoing=Outgoing(path, fields, form, stream=streamed),
            heard=Heard(
                seconds,
                prompt_bytes=len(fields.get("prompt", "").encode()),
                output_tokens=model.max_output_tokens,
                tokens_per_second=model.audio_tokens_per_second,
            ),
        )
        if streamed:
            return await serve_transcription_stream(runtime, request, ask)
        return await serve_transcription(runtime, request, ask)


@post("/v1/audio/transcriptions", status_code=200)
async def create_transcription(request: Request[Any, Any, Any]) -> Response[bytes] | EventStream:
    return await _transcribe(request, endpoints.AUDIO_TRANSCRIPTIONS, "/audio/transcriptions")


@post("/v1/audio/translations", status_code=200)
async def create_translation(request: Request[Any, Any, Any]) -> Response[bytes] | EventStream:
    return await _transcribe(request, endpoints.AUDIO_TRANSLATIONS, "/audio/translations")


def check_speech(body: dict[str, Any]) -> str:
    """The input to speak, once the fields Tollgate judges check out (400 naming the field)."""
    require(body, "model", "input", "voice")
    if not isinstance(body["model"], str):
        raise InvalidRequest("Invalid 'model': expected a string.", param="model")
    text = body["input"]
    if not isinstance(text, str) or not text:
        raise InvalidRequest("Invalid 'input': expected a non-empty string.", param="input")
    if len(text) > MAX_SPEECH_INPUT:
        raise InvalidRequest(
            f"'input' is {len(text)} characters long; at most {MAX_SPEECH_INPUT} may be spoken in one request.",
            param="input",
        )
    if not isinstance(body["voice"], str | dict):
        raise InvalidRequest("Invalid 'voice': expected a voice's name.", param="voice")
    fmt = body.get("response_format")
    if fmt is not None and fmt not in SPEECH_FORMATS:
        raise InvalidRequest(
            f"Invalid 'response_format': {fmt!r}; expected one of {', '.join(SPEECH_FORMATS)}.",
            param="response_format",
        )
    speed = body.get("speed")
    if speed is not None and (
        isinstance(speed, bool) or not isinstance(speed, int | float) or not SPEED_RANGE[0] <= speed <= SPEED_RANGE[1]
    ):
        raise InvalidRequest(
            f"Invalid 'speed': expected a number between {SPEED_RANGE[0]} and {SPEED_RANGE[1]}.", param="speed"
        )
    if body.get("stream_format", "audio") != "audio":
        raise InvalidRequest("Only 'stream_format': 'audio' is served.", param="stream_format")
    return text


@post("/v1/audio/speech", status_code=200)
async def create_speech(request: Request[Any, Any, Any]) -> Response[bytes] | EventStream:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    raw = await request.body()
    body = read_json_object(raw, runtime.settings.max_json_depth)
    text = check_speech(body)
    model = served_model(runtime.settings, body["model"], endpoints.AUDIO_SPEECH)
    authorize(principal, model.id, endpoints.AUDIO_SPEECH)
    ask = AudioAsk(
        principal=principal,
        model=model,
        endpoint=endpoints.AUDIO_SPEECH,
        fields=body,
        digest=raw,
        usage=TokenUsage(input_characters=len(text)),
        outgoing=Outgoing("/audio/speech", body, stream=True),
    )
    return await serve_speech(runtime, request, ask)
