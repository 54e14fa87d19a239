"""Anthropic models on AWS Bedrock: the Messages wire at Bedrock's ``InvokeModel`` URLs, signed with SigV4.

Bedrock serves Claude with the Messages body itself, less ``model`` (it is in the URL) and ``stream``
(the URL says that too), plus ``anthropic_version: bedrock-2023-05-31``; betas go in the body's
``anthropic_beta``. A plain answer is a Messages answer as Anthropic sends it. A stream comes in AWS's
binary event-stream framing: each ``chunk`` event's JSON carries one Anthropic stream event,
base64-encoded, and a failure mid-stream is an ``exception`` message. So a Bedrock deployment is an
Anthropic one with another URL, another authentication and another stream framing; every route treats
it as the ``messages`` wire (passed through to Messages clients, translated for the others).

AWS's formats are botocore's, not written here: ``SigV4Auth`` signs, the usual credential chain
(environment, profile, a role) finds the credentials, ``EventStreamBuffer`` reads the frames.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import quote

import aiohttp
import msgspec
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials
from botocore.eventstream import EventStreamBuffer, EventStreamMessage, ParserError
from botocore.session import get_session
from yarl import URL

from app.errors import GatewayError, UpstreamFailure
from app.upstream.base import Answer, StreamEvent
from app.upstream.client import Chunks, Timeouts, TransportFailure, UpstreamClient, close
from app.upstream.errors import error_from_exception, error_from_stream_event
from app.upstream.http import HttpUpstream

BEDROCK_VERSION = "bedrock-2023-05-31"
EVENT_STREAM = "application/vnd.amazon.eventstream"
#: Bedrock's stream exceptions, as the Anthropic error types the error mapping knows.
_EXCEPTION_TYPES = {
    "throttlingException": "rate_limit_error",
    "serviceUnavailableException": "overloaded_error",
    "modelNotReadyException": "overloaded_error",
}


def default_endpoint(region: str) -> str:
    return f"https://bedrock-runtime.{region}.amazonaws.com"


class AwsCredentials:
    """The deployment's AWS credentials, found once through botocore's chain (environment variables,
    the shared files and ``AWS_PROFILE``, web identity, container or instance roles) and refreshed when
    botocore says they are about to expire. Finding or refreshing them may read files or call AWS, so
    it runs in a thread; the common case, credentials still fresh, costs no more than an attribute read."""

    def __init__(self) -> None:
        self._source: Any = None
        self._frozen: ReadOnlyCredentials | None = None
        self._refreshable = False

    async def current(self) -> ReadOnlyCredentials:
        if self._frozen is not None and not (self._refreshable and self._source.refresh_needed()):
            return self._frozen
        self._frozen = await asyncio.to_thread(self._resolve)
        return self._frozen

    def _resolve(self) -> ReadOnlyCredentials:
        if self._source is None:
            source = get_session().get_credentials()
            if source is None:
                raise UpstreamFailure("No AWS credentials were found for the Bedrock deployment.")
            self._source = source
            self._refreshable = hasattr(source, "refresh_needed")
        frozen: ReadOnlyCredentials = self._source.get_frozen_credentials()
        return frozen


class BedrockUpstream(HttpUpstream):
    """The ``messages`` wire at ``{endpoint}/model/{modelId}/invoke`` (and ``…/invoke-with-response-stream``);
    ``modelId`` is the deployment's ``model``: a model id or a cross-region inference profile
    (``us.anthropic.claude-…``)."""

    wire = "messages"

    def __init__(self, endpoint: str, region: str, *, timeout: Timeouts, client: UpstreamClient) -> None:
        super().__init__({}, timeout=timeout, client=client)
        self._base = endpoint.rstrip("/")
        self._region = region
        self._credentials = AwsCredentials()

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        url, content = self._request(body, headers, "invoke")
        answer = await self._post_json(as_sent(url), content, await self._signed(url, content, "application/json"))
        if not answer.starts_with("content", b"["):
            raise UpstreamFailure("The upstream provider sent a message without content.")
        return answer

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> EventStream:
        url, content = self._request(body, headers, "invoke-with-response-stream")
        return EventStream(await self._send(as_sent(url), content, await self._signed(url, content, EVENT_STREAM)))

    async def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        raise UpstreamFailure("A Bedrock deployment serves only messages.", status=400)

    def _request(self, body: dict[str, Any], headers: dict[str, str] | None, action: str) -> tuple[str, bytes]:
        """The URL and body Bedrock takes for a Messages request (``model`` into the URL, betas into the body)."""
        sent = {key: value for key, value in body.items() if key not in ("model", "stream")}
        sent.setdefault("anthropic_version", BEDROCK_VERSION)
        betas = (headers or {}).get("anthropic-beta")
        if betas:
            sent.setdefault("anthropic_beta", [beta.strip() for beta in betas.split(",") if beta.strip()])
        return model_url(self._base, body, action), msgspec.json.encode(sent)

    async def _signed(self, url: str, content: bytes, accept: str) -> dict[str, str]:
        """The request's headers with SigV4's (``Authorization``, ``X-Amz-Date``, and a session's token)."""
        request = AWSRequest("POST", url, {"content-type": "application/json", "accept": accept}, content)
        SigV4Auth(await self._credentials.current(), "bedrock", self._region).add_auth(request)
        return dict(request.headers.items())


def model_url(base: str, body: dict[str, Any], action: str) -> str:
    """``action``'s URL for the body's model, the model id percent-encoded whole, as botocore
    serialises it (``us.anthropic.claude-sonnet-4-v1:0`` as ``…v1%3A0``): it is signed so, and
    :func:`as_sent` keeps it so on the wire, byte for byte what AWS's own SDKs send."""
    model = quote(str(body.get("model", "")), safe="")
    return f"{base}/model/{model}/{action}"


def as_sent(url: str) -> URL:
    """``url`` as the HTTP client must send it: already encoded (aiohttp would otherwise turn the
    model id's ``%3A`` back into ``:``, and the path would no longer be the one signed)."""
    return URL(url, encoded=True)


class _Chunk(msgspec.Struct):
    #: The Anthropic stream event's JSON (base64 on the wire; msgspec decodes it into bytes).
    data: bytes = msgspec.field(name="bytes")


_read_chunk = msgspec.json.Decoder(_Chunk).decode
#: The events of the frames read so far, and whether the stream ended (or how it failed).
FrameReader = Callable[[EventStreamBuffer], tuple[list[StreamEvent], "bool | GatewayError"]]


class EventStream:
    """A Bedrock stream as batches of events (those each read completed), until its end: by default
    Anthropic's, until ``message_stop`` (``read``: another reading of the frames, Converse's). An
    exception message, a frame botocore cannot read, or a broken connection raises, after the events
    before it were handed on."""

    def __init__(self, response: aiohttp.ClientResponse, read: FrameReader | None = None) -> None:
        self._response = response
        self._read = read or _events

    async def __aiter__(self) -> AsyncIterator[list[StreamEvent]]:
        frames = EventStreamBuffer()
        try:
            async for data in Chunks(self._response):
                frames.add_data(data)
                batch, end = self._read(frames)
                if batch:
                    yield batch
                if isinstance(end, GatewayError):
                    raise end
                if end:
                    return
        except TransportFailure as exc:
            raise error_from_exception(exc, answering=True) from None
        finally:
            close(self._response)

    def close(self) -> None:
        close(self._response)


def read_frames(
    frames: EventStreamBuffer,
    event_of: Callable[[EventStreamMessage], StreamEvent | GatewayError | None],
    is_last: Callable[[StreamEvent], bool],
) -> tuple[list[StreamEvent], bool | GatewayError]:
    """The events of the frames read so far (each frame read by ``event_of``: an event, the failure
    it reports, or None for a frame to skip), and whether the stream ended (``is_last``) or how it failed."""
    batch: list[StreamEvent] = []
    try:
        for message in frames:
            event = event_of(message)
            if isinstance(event, GatewayError):
                return batch, event
            if event is None:
                continue
            batch.append(event)
            if is_last(event):
                return batch, True
    except ParserError:
        return batch, UpstreamFailure("The upstream provider sent an invalid stream frame.")
    return batch, False


def _is_message_stop(event: StreamEvent) -> bool:
    return b"message_stop" in event.data and (event.object() or {}).get("type") == "message_stop"


def _events(frames: EventStreamBuffer) -> tuple[list[StreamEvent], bool | GatewayError]:
    """An InvokeModel stream's Anthropic events, until ``message_stop``."""
    return read_frames(frames, _event, _is_message_stop)


def _event(message: EventStreamMessage) -> StreamEvent | GatewayError | None:
    """One frame's Anthropic event; an exception frame as the failure it reports; None for other events."""
    headers = message.headers
    kind = headers.get(":message-type")
    if kind == "event":
        if headers.get(":event-type") != "chunk":
            return None
        try:
            event = StreamEvent(_read_chunk(message.payload).data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return UpstreamFailure("The upstream provider sent an invalid stream event.")
        if b'"error"' in event.data and (value := event.object() or {}).get("type") == "error":
            return _failure(value.get("error"), event.json())
        return event
    name = str(headers.get(":exception-type") or headers.get(":error-code") or "error")
    try:
        text = msgspec.json.decode(message.payload).get("message", "")
    except (msgspec.DecodeError, AttributeError):
        text = message.payload[:300].decode("utf-8", "replace")
    return _failure({"type": _EXCEPTION_TYPES.get(name, name), "message": f"{name}: {text}"}, None)


def _failure(error: object, event: dict[str, object] | None) -> GatewayError:
    failure = error_from_stream_event(error)
    failure.upstream_wire, failure.upstream_event = "messages", event
    return failure
