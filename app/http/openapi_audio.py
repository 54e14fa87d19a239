"""The OpenAPI document's audio endpoints: a multipart upload (transcriptions, translations) and a
JSON body answered with audio bytes (speech), each with the headers that carry its cost.

Litestar sees only the handlers' ``request`` argument, so the bodies and answers are described here
(``complete`` in ``app/http/openapi.py`` calls :func:`document_audio`)."""

from __future__ import annotations

from typing import Any

from app.http.audio_call import COST_HEADER, COST_USD_HEADER, REMAINING_HEADER

_TEXT = {"type": "string"}
_UPLOAD = {
    "type": "object",
    "required": ["file", "model"],
    "properties": {
        "file": {
            "type": "string",
            "format": "binary",
            "description": "the audio: flac, m4a, mp3, mp4, mpeg, mpga, ogg, wav; at most 25 MiB",
        },
        "model": _TEXT,
        "language": _TEXT,
        "prompt": _TEXT,
        "response_format": {"type": "string", "enum": ["json", "text", "srt", "verbose_json", "vtt"]},
        "temperature": {"type": "number", "minimum": 0, "maximum": 1},
        "timestamp_granularities[]": {"type": "array", "items": {"type": "string", "enum": ["word", "segment"]}},
        "stream": {
            "type": "boolean",
            "description": "transcriptions only: the upstream's server-sent events relayed as they come, the "
            "last (`transcript.text.done`) carrying `usage.cost` and `usage.remaining`",
        },
    },
    "additionalProperties": True,
}
_SPEECH = {
    "type": "object",
    "required": ["model", "input", "voice"],
    "properties": {
        "model": _TEXT,
        "input": {"type": "string", "minLength": 1, "maxLength": 4096},
        "voice": {"anyOf": [_TEXT, {"type": "object"}]},
        "response_format": {"type": "string", "enum": ["mp3", "opus", "aac", "flac", "wav", "pcm"]},
        "speed": {"type": "number", "minimum": 0.25, "maximum": 4},
        "instructions": _TEXT,
        "stream_format": {"type": "string", "enum": ["audio"]},
    },
    "additionalProperties": True,
}
_COST_HEADERS = {
    COST_HEADER: {"description": "the charge, in credits", "schema": _TEXT},
    COST_USD_HEADER: {"description": "the charge, in USD", "schema": _TEXT},
    REMAINING_HEADER: {"description": "the team's balance once charged, in credits", "schema": _TEXT},
}
_ERRORS = {
    "400": "a field Tollgate checks is wrong, the body is not a valid form (or has too many parts), "
    "or the file's audio cannot be read",
    "401": "missing, invalid or revoked API key",
    "402": "the balance cannot cover the seconds or characters (says how many it covers)",
    "403": "the key may not use this model or endpoint",
    "404": "no such model, or the model does not serve this endpoint",
    "413": "the body, a file or a field is larger than the gateway takes",
    "429": "a rate limit",
    "502": "the upstream failed (nothing charged)",
}


def document_audio(document: dict[str, Any], error_schema: dict[str, Any]) -> None:
    """Fill in the three audio operations of ``document`` (OpenAI's error shape: ``error_schema``)."""
    paths = document.setdefault("paths", {})
    errors = {
        code: {"description": why, "content": {"application/json": {"schema": error_schema}}}
        for code, why in _ERRORS.items()
    }
    for path, what in (
        ("/v1/audio/transcriptions", "Transcribe"),
        ("/v1/audio/translations", "Translate into English"),
    ):
        paths.setdefault(path, {}).setdefault("post", {}).update(
            {
                "summary": f"{what} an audio file, billed per second of it (or per token) to the key's team",
                "description": "A multipart upload; fields not listed are passed to the upstream untouched. JSON "
                "answers carry `usage.cost` and `usage.remaining`; every whole answer carries them in headers, "
                "a stream in its last event.",
                "security": [{"bearer": []}, {"x-api-key": []}],
                "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": _UPLOAD}}},
                "responses": {
                    "200": {
                        "description": "the transcript: JSON, or text for text, srt and vtt; events for a stream",
                        "headers": _COST_HEADERS,
                        "content": {
                            "application/json": {"schema": {"type": "object"}},
                            "text/plain": {"schema": _TEXT},
                            "text/event-stream": {"schema": _TEXT},
                        },
                    },
                    **errors,
                },
            }
        )
        paths[path]["post"].pop("parameters", None)
    paths.setdefault("/v1/audio/speech", {}).setdefault("post", {}).update(
        {
            "summary": "Speak text, billed per input character to the key's team",
            "description": "The audio is streamed as the upstream makes it; charged once all of it was sent.",
            "security": [{"bearer": []}, {"x-api-key": []}],
            "requestBody": {"required": True, "content": {"application/json": {"schema": _SPEECH}}},
            "responses": {
                "200": {
                    "description": "the audio, in the format asked",
                    "headers": _COST_HEADERS,
                    "content": {"audio/*": {"schema": {"type": "string", "format": "binary"}}},
                },
                **errors,
            },
        }
    )
    paths["/v1/audio/speech"]["post"].pop("parameters", None)
