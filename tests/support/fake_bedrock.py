"""The AWS Bedrock side of the fake upstream: Anthropic models at ``InvokeModel`` and
``InvokeModelWithResponseStream`` (``POST /model/{modelId}/invoke`` and
``/model/{modelId}/invoke-with-response-stream`` on ``FakeUpstream.anthropic_base_url``), and any model
at ``Converse`` and ``ConverseStream`` (``/converse``, ``/converse-stream``: tests/support/fake_converse.py).

Every request's SigV4 signature is checked as Bedrock checks it: botocore's own signer recomputes it
from the request as it arrived (its raw path, the headers it names as signed, its body) with the test
credentials, and a request signed with another secret gets Bedrock's 403 ``InvalidSignatureException``
(an unknown access key its ``UnrecognizedClientException``). The body must be the Messages body Bedrock
takes: ``anthropic_version`` (``bedrock-2023-05-31``, or a dated version as newer SDKs send), no
``model``, no ``stream``. The answer is the fake
Anthropic's (``tests/support/fake_anthropic.py``: the same echo and ``[[directive]]`` markers); a stream's
Anthropic events go out in AWS's event-stream framing, each in a ``chunk`` event as base64, the last one
carrying ``amazon-bedrock-invocationMetrics`` as Bedrock's does, and a mid-stream error as an exception
message. ``anthropic.AnthropicBedrock`` and boto3's ``bedrock-runtime`` client read it
(tests/e2e/test_fake_bedrock.py).

botocore reads event streams but does not write them, so ``frame`` writes one message here: the prelude
(total and headers length, CRC32), string headers, the payload and the message's CRC32.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import re
import struct
import time
from typing import Any
from urllib.parse import unquote

import msgspec
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support.fake_upstream import Message, Receive, Send, _send_json

ACCESS_KEY = "AKIATOLLGATEFAKE0001"
SECRET_KEY = "fake/Bedrock+secret/key/for/the/tests000"
REGION = "us-east-1"
VERSION = "bedrock-2023-05-31"
_PATH = re.compile(r"^/model/(?P<model>[^/]+)/(?P<action>invoke|invoke-with-response-stream|converse|converse-stream)$")
_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request,"
    r"\s*SignedHeaders=(?P<signed>[^,]+),\s*Signature=(?P<signature>[0-9a-f]{64})$"
)
_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret "
    "Access Key and signing method. Consult the service documentation for details."
)


class BedrockRefusal(Exception):
    """Bedrock's error answer: a status, its ``x-amzn-ErrorType`` and ``{"message": ...}``."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def check_signature(method: str, url: str, headers: dict[str, str], body: bytes) -> None:
    """Recompute the request's SigV4 signature with the test credentials; refuse it as Bedrock does."""
    found = _AUTH.match(headers.get("authorization", ""))
    if not found:
        raise BedrockRefusal(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
    if found["key"] != ACCESS_KEY:
        raise BedrockRefusal(
            403, "UnrecognizedClientException", "The security token included in the request is invalid."
        )
    signed = found["signed"].split(";")
    if any(name not in headers for name in signed) or "x-amz-date" not in signed:
        raise BedrockRefusal(403, "InvalidSignatureException", _MISMATCH)
    if found["service"] != "bedrock" or found["region"] != REGION:
        raise BedrockRefusal(
            403, "InvalidSignatureException", "Credential should be scoped to a valid region and service 'bedrock'. "
        )
    request = AWSRequest(method, url, {name: headers[name] for name in signed}, body)
    request.context["timestamp"] = headers["x-amz-date"]
    signer = SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY, headers.get("x-amz-security-token")), "bedrock", REGION)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if expected != found["signature"]:
        raise BedrockRefusal(403, "InvalidSignatureException", _MISMATCH)
    signed_at = calendar.timegm(time.strptime(headers["x-amz-date"], "%Y%m%dT%H%M%SZ"))
    if abs(time.time() - signed_at) > 300:
        raise BedrockRefusal(403, "InvalidSignatureException", "Signature expired: the request is more than 5 min old.")


def bedrock_body(raw: bytes) -> dict[str, Any]:
    """The Messages body Bedrock takes, checked as Bedrock checks it."""
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise BedrockRefusal(
            400, "ValidationException", "Malformed input request, please reformat your input and try again."
        ) from None
    if not isinstance(body, dict):
        raise BedrockRefusal(400, "ValidationException", "Malformed input request: expected an object")
    # Bedrock's documented value; newer anthropic SDKs send the Messages API's dated version, also taken.
    if not re.fullmatch(r"(bedrock-)?\d{4}-\d{2}-\d{2}", str(body.get("anthropic_version"))):
        raise BedrockRefusal(
            400, "ValidationException", f"invalid anthropic_version: {body.get('anthropic_version')!r}"
        )
    extra = sorted(key for key in ("model", "stream") if key in body)
    if extra:
        raise BedrockRefusal(
            400, "ValidationException", f"Malformed input request: extraneous key [{extra[0]}] is not permitted"
        )
    return body


async def handle_bedrock(
    scope: dict[str, Any], raw: bytes, headers: dict[str, str], receive: Receive, send: Send
) -> None:
    """Serve one Bedrock request through the fake Anthropic, reframed as Bedrock frames it."""
    from tests.support.fake_anthropic import handle_anthropic  # lazy: it imports fake_upstream, which imports this

    raw_path = scope["raw_path"].decode("latin-1")
    route = _PATH.match(raw_path)
    try:
        if scope["method"] != "POST" or route is None:
            raise BedrockRefusal(404, "UnknownOperationException", "Unknown operation")
        check_signature("POST", f"http://{headers['host']}{raw_path}", headers, raw)
        if route["action"].startswith("converse"):
            return await _converse(route["action"] == "converse-stream", unquote(route["model"]), raw, receive, send)
        body = bedrock_body(raw)
    except BedrockRefusal as refusal:
        return await refuse(send, refusal)
    stream = route["action"] == "invoke-with-response-stream"
    anthropic = {**body, "model": unquote(route["model"]), **({"stream": True} if stream else {})}
    anthropic.pop("anthropic_version")
    sent_headers = {"anthropic-version": "2023-06-01"}
    if "anthropic_beta" in body:
        anthropic.pop("anthropic_beta")
        sent_headers["anthropic-beta"] = ",".join(body["anthropic_beta"])
    reframe = _Reframed(send, stream)
    await handle_anthropic(None, "POST", "/v1/messages", msgspec.json.encode(anthropic), sent_headers, receive, reframe)


async def _converse(stream: bool, model: str, raw: bytes, receive: Receive, send: Send) -> None:
    """A Converse request (``tests/support/fake_converse.py``), served by the fake Anthropic."""
    from tests.support.fake_anthropic import handle_anthropic
    from tests.support.fake_converse import Conversed, anthropic_body

    body = msgspec.json.encode(anthropic_body(raw, model, stream))
    headers = {"anthropic-version": "2023-06-01"}
    await handle_anthropic(None, "POST", "/v1/messages", body, headers, receive, Conversed(send, stream))


async def refuse(send: Send, refusal: BedrockRefusal) -> None:
    extra = [(b"x-amzn-errortype", f"{refusal.kind}:http://internal.amazon.com/coral/com.amazon.bedrock/".encode())]
    await _send_json(
        send, refusal.status, {"message": refusal.message}, [*extra, (b"x-amzn-requestid", b"fake-request-id")]
    )


class _Reframed:
    """The fake Anthropic's ASGI messages, as Bedrock sends them: an error in Bedrock's shape, a stream
    in event-stream frames (its SSE events read from each body message the fake writes)."""

    def __init__(self, send: Send, stream: bool) -> None:
        self._send, self._stream = send, stream
        self.__self__ = getattr(send, "__self__", None)  # for the fake's dropped connections
        self._status = 200
        self._pending = b""
        self._usage: dict[str, int] = {}
        self._started = time.monotonic()

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._status = message["status"]
            if self._status == 200 and self._stream:
                headers = [(b"content-type", b"application/vnd.amazon.eventstream"), (b"x-amzn-requestid", b"fake")]
                return await self._send({**message, "headers": headers})
            if self._status != 200:
                self._pending = b""
                return None
            return await self._send(message)
        if message["type"] != "http.response.body":
            return await self._send(message)
        if self._status != 200:
            return await self._error(message)
        if not self._stream:
            return await self._send(message)
        self._pending += message.get("body", b"")
        *events, self._pending = self._pending.split(b"\n\n")
        frames = b"".join(self._frame(event) for event in events if event.strip())
        await self._send({"type": "http.response.body", "body": frames, "more_body": message.get("more_body", False)})

    async def _error(self, message: Message) -> None:
        """The fake Anthropic's error, as Bedrock would answer it."""
        self._pending += message.get("body", b"")
        if message.get("more_body"):
            return
        error = msgspec.json.decode(self._pending).get("error", {})
        kinds = {400: "ValidationException", 429: "ThrottlingException", 503: "ServiceUnavailableException"}
        kind = kinds.get(self._status, "ModelErrorException" if self._status < 500 else "InternalServerException")
        await refuse(self._send, BedrockRefusal(self._status, kind, str(error.get("message", ""))))

    def _frame(self, event: bytes) -> bytes:
        data = next(line[6:] for line in event.split(b"\n") if line.startswith(b"data: "))
        value = msgspec.json.decode(data)
        kind = value.get("type")
        if kind == "error":
            error = value["error"]
            name = "throttlingException" if error.get("type") == "rate_limit_error" else "modelStreamErrorException"
            return frame({":message-type": "exception", ":exception-type": name}, {"message": error["message"]})
        usage = value.get("message", {}).get("usage") if kind == "message_start" else value.get("usage")
        self._usage.update(usage or {})
        if kind == "message_stop":
            elapsed = int((time.monotonic() - self._started) * 1000)
            value["amazon-bedrock-invocationMetrics"] = {
                "inputTokenCount": self._usage.get("input_tokens", 0),
                "outputTokenCount": self._usage.get("output_tokens", 0),
                "invocationLatency": elapsed,
                "firstByteLatency": min(elapsed, 5),
            }
        chunk = {"bytes": base64.b64encode(msgspec.json.encode(value)).decode()}
        return frame({":event-type": "chunk", ":message-type": "event"}, chunk)


def frame(headers: dict[str, str], payload: dict[str, Any]) -> bytes:
    """One event-stream message: string headers (type 7), a JSON payload, both CRC32s."""
    encoded = b"".join(
        struct.pack("B", len(name)) + name.encode() + b"\x07" + struct.pack(">H", len(value)) + value.encode()
        for name, value in {**headers, ":content-type": "application/json"}.items()
    )
    body = msgspec.json.encode(payload)
    prelude = struct.pack(">II", 16 + len(encoded) + len(body), len(encoded))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    message = prelude + encoded + body
    return message + struct.pack(">I", binascii.crc32(message))
