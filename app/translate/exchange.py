"""What a request becomes on its way to the upstream, and its answer on the way back.

Decided before anything is held, so that every refusal (a field that cannot be translated, a
built-in tool the model refuses) leaves the team's money as it was:

- **Passed through** when the client's protocol is the upstream's wire: the body goes as the client
  wrote it (only ``model`` becomes the deployment's name), with the protocol's version and beta
  headers; the answer comes back as the upstream wrote it, plus the usage fields Tollgate adds.
  Nothing in it is judged but what Tollgate must read (model, limits, prompt size, stream).
- **Translated** otherwise, through the canonical model: the client's codec reads the request,
  the upstream's codec writes it, and the answer goes back the same way, tool names mapped back.

Either way the relay (``app/http/relay.py``) sees one :class:`Exchange`: a body to send, a
decoder for a whole answer, and a stream relay (``app/translate/stream_relay.py``) for the client's
frames: the upstream's bytes passed on as they came (chat and messages passed through), or its events
read as canonical ones and written again. A model whose deployments speak several wires gets one
exchange per wire (``Exchange.alternatives``); the one whose wire answered decodes and relays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.json import encode
from app.tokens import Protocol as Wire
from app.translate import canonical as c
from app.translate import tools
from app.translate.chat import passthrough as chat_pass
from app.translate.chat.client import ChatStreamWriter, canonical_to_chat_response, chat_request_to_canonical
from app.translate.chat.upstream import ChatChunkReader, canonical_to_chat_body, chat_response_to_canonical
from app.translate.converse.upstream import ConverseEventReader, canonical_to_converse_body, converse_to_canonical
from app.translate.gemini import passthrough as gemini_pass
from app.translate.gemini.answer import GeminiStreamWriter, canonical_to_gemini
from app.translate.gemini.client import gemini_request_to_canonical
from app.translate.gemini.upstream import GeminiChunkReader, canonical_to_gemini_body, gemini_response_to_canonical
from app.translate.messages import passthrough as messages_pass
from app.translate.messages.client import MessagesStreamWriter, canonical_to_message, messages_request_to_canonical
from app.translate.messages.upstream import MessagesEventReader, canonical_to_messages_body, message_to_canonical
from app.translate.responses import passthrough as responses_pass
from app.translate.responses.client import ResponseShell, canonical_to_response, responses_request_to_canonical
from app.translate.responses.stream import ResponsesStreamWriter
from app.translate.responses.upstream import ResponsesEventReader, canonical_to_responses_body, response_to_canonical
from app.translate.stream_relay import CanonicalRelay, EventReader, StreamRelay, StreamWriter
from app.upstream.base import Answer
from app.upstream.fallback import Outgoing
from domain.settings import Model
from domain.usage import TokenUsage

#: The headers of each wire that say which version of it, and which betas, the client speaks.
VERSION_HEADERS: dict[str, tuple[str, ...]] = {
    "chat": ("openai-beta",),
    "responses": ("openai-beta",),
    "messages": ("anthropic-version", "anthropic-beta"),
    "gemini": (),
}
#: What a stream's answer is: events, for every wire but Gemini's stream without ``alt=sse``.
EVENT_STREAM = "text/event-stream"


@dataclass
class Exchange:
    #: The upstream wire the body is written in.
    wire: str
    body: dict[str, Any]
    headers: dict[str, str]
    stream: bool
    #: Whose errors reach the client word for word: the wire of the deployments that get the body as
    #: the client wrote it (None: none do, every one of them is sent a translation).
    passthrough_wire: str | None
    #: A whole answer, read for its bill (a passed-through one only as far as the bill needs).
    decode: Callable[[Answer], c.Response]
    #: The client's body of a whole answer, given the charge's usage fields.
    render: Callable[[Answer, c.Response, dict[str, Any]], bytes]
    #: A new stream's relay: the upstream's events → the client's frames.
    relay: Callable[[], StreamRelay]
    dropped_tools: list[str] = field(default_factory=list)
    #: A stream's media type (Gemini's stream without ``alt=sse`` is one JSON array).
    stream_type: str = EVENT_STREAM
    #: The same request planned for the model's deployments of other wires, by wire: failover across
    #: providers sends each deployment its own wire's body.
    alternatives: dict[str, Exchange] = field(default_factory=dict)

    def planned(self) -> dict[str, Outgoing]:
        """What goes to the deployments of each wire the request was planned for."""
        outgoing = {self.wire: Outgoing(self.body, self.headers)}
        for wire, other in self.alternatives.items():
            outgoing[wire] = Outgoing(other.body, other.headers)
        return outgoing

    def answered_on(self, wire: str) -> Exchange:
        """The exchange that reads an answer from a deployment of ``wire``."""
        return self.alternatives.get(wire, self)


_DECODERS: dict[str, Callable[[dict[str, Any]], c.Response]] = {
    "chat": chat_response_to_canonical,
    "messages": message_to_canonical,
    "responses": response_to_canonical,
    "gemini": gemini_response_to_canonical,
    "converse": converse_to_canonical,
}
_READERS: dict[str, Callable[[], EventReader]] = {
    "chat": ChatChunkReader,
    "messages": MessagesEventReader,
    "responses": ResponsesEventReader,
    "gemini": GeminiChunkReader,
    "converse": ConverseEventReader,
}
_TO_CANONICAL: dict[str, Callable[[dict[str, Any]], c.Request]] = {
    "chat": chat_request_to_canonical,
    "messages": messages_request_to_canonical,
    "responses": responses_request_to_canonical,
    "gemini": gemini_request_to_canonical,
}


def plan(
    model: Model, wire: str, protocol: Wire, body: dict[str, Any], headers: Mapping[str, str], prompt_tokens: int
) -> Exchange:
    """The exchange for a request in ``protocol`` to a model whose upstream speaks ``wire``; ``headers``
    are the client's (looked up by lower-case name: the server's headers ignore case)."""
    if wire == protocol:
        return _passthrough(model, protocol, body, headers)
    req = _TO_CANONICAL[protocol](body)
    req.effort = c.effort_for_model(req.effort, [level.value for level in model.effort_levels])
    tools.settle_builtins(req, model.builtin_tools, model.id)
    return _translated(model, wire, protocol, req, body, prompt_tokens)


def _include_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _passthrough(model: Model, wire: Wire, body: dict[str, Any], client_headers: Mapping[str, str]) -> Exchange:
    headers = {name: client_headers[name] for name in VERSION_HEADERS[wire] if client_headers.get(name)}
    if wire == "messages" and "anthropic-version" not in headers and client_headers.get("compat-version"):
        headers["anthropic-version"] = client_headers["compat-version"]
    builtins = tools.builtin_names(body, wire)
    dropped: list[str] = []
    if builtins:
        chosen = tools.policy(model.builtin_tools, passthrough=True)
        if chosen == "refuse":
            tools.refuse_builtins(builtins, model.id)
        elif chosen == "drop":
            body, dropped = tools.without_builtins(body, wire), builtins
    forward = dict(body)
    stream = bool(body.get("stream"))
    include_usage = _include_usage(body)
    if wire == "chat" and stream:  # the upstream's usage is what the charge is made from
        forward["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    read = {
        "chat": chat_pass.read_answer,
        "messages": messages_pass.read_answer,
        "responses": responses_pass.read_answer,
        "gemini": gemini_pass.read_answer,
    }[wire]
    render = {
        "chat": chat_pass.render_answer,
        "messages": messages_pass.render_answer,
        "responses": responses_pass.render_answer,
        "gemini": gemini_pass.render_answer,
    }[wire]
    relays: dict[str, Callable[[], StreamRelay]] = {
        "chat": lambda: chat_pass.ChatPassThrough(model.id, include_usage),
        "messages": lambda: messages_pass.MessagesPassThrough(model.id),
        "responses": lambda: CanonicalRelay(
            ResponsesEventReader(), responses_pass.ResponsesPassThrough(model.id), pure_finish=True
        ),
        "gemini": lambda: gemini_pass.GeminiPassThrough(sse=body.get("alt") != "json"),
    }
    return Exchange(
        wire=wire,
        body=forward,
        headers=headers,
        stream=stream,
        passthrough_wire=wire,
        decode=read,
        render=lambda answer, resp, extra: render(
            answer, model.id, resp.usage or TokenUsage(0, 0), resp.reasoning_tokens, extra
        ),
        relay=relays[wire],
        dropped_tools=dropped,
        stream_type="application/json" if wire == "gemini" and body.get("alt") == "json" else EVENT_STREAM,
    )


class _NamedReader:
    """An upstream's events with its tool calls mapped back to the client's tools."""

    def __init__(self, reader: EventReader, names: tools.ToolNames) -> None:
        self._reader = reader
        self._names = names

    def events(self, raw: dict[str, Any]) -> list[c.Event]:
        return self._names.events(self._reader.events(raw))


def _upstream_body(req: c.Request, wire: str, model: Model, names: tools.ToolNames) -> dict[str, Any]:
    """The request in the upstream's wire. Its ``model`` is the gateway's id: the deployment that is
    called puts its own name in (:class:`app.upstream.fallback.FallbackUpstream`)."""
    if wire == "messages":
        return canonical_to_messages_body(req, model.id, model.max_output_tokens, names)
    if wire == "responses":
        return canonical_to_responses_body(req, model.id)
    if wire == "gemini":
        return canonical_to_gemini_body(req, model.id, names)
    if wire == "converse":
        return canonical_to_converse_body(req, model.max_output_tokens, names)
    return canonical_to_chat_body(req, model.id, names)


def _translated(
    model: Model, wire: str, protocol: Wire, req: c.Request, body: dict[str, Any], prompt_tokens: int
) -> Exchange:
    names = tools.ToolNames(req.tools, flatten=wire != "responses")
    decoder = _DECODERS[wire]
    reader = _READERS[wire]
    render: Callable[[Answer, c.Response, dict[str, Any]], bytes]
    writer: Callable[[], StreamWriter]
    if protocol == "chat":
        include_usage = _include_usage(body)
        render = lambda answer, resp, extra: encode(canonical_to_chat_response(resp, model.id, extra))  # noqa: E731
        writer = lambda: ChatStreamWriter(model.id, include_usage)  # noqa: E731
    elif protocol == "messages":
        render = lambda answer, resp, extra: encode(canonical_to_message(resp, model.id, extra))  # noqa: E731
        writer = lambda: MessagesStreamWriter(model.id, prompt_tokens)  # noqa: E731
    elif protocol == "gemini":
        thoughts, sse = req.reasoning_summary is not None, body.get("alt") != "json"
        render = lambda answer, resp, extra: encode(canonical_to_gemini(resp, model.id, thoughts, extra))  # noqa: E731
        writer = lambda: GeminiStreamWriter(model.id, thoughts, sse=sse)  # noqa: E731
    else:
        shell = ResponseShell(body, model.id)
        render = lambda answer, resp, extra: encode(canonical_to_response(resp, shell, extra))  # noqa: E731
        writer = lambda: ResponsesStreamWriter(shell)  # noqa: E731
    return Exchange(
        wire=wire,
        body=_upstream_body(req, wire, model, names),
        headers={},
        stream=req.stream,
        passthrough_wire=None,
        decode=lambda answer: names.answer(decoder(answer.json())),
        render=render,
        relay=lambda: CanonicalRelay(_NamedReader(reader(), names), writer()),
        dropped_tools=req.dropped_tools,
        stream_type="application/json" if body.get("alt") == "json" else EVENT_STREAM,
    )
