"""The canonical request, response and stream events every protocol translates to and from.

It holds what the three protocols share — system text, turns of text, images, documents, tool
calls and their results, reasoning, sampling parameters, limits — with finish reasons in the
OpenAI vocabulary (``stop``, ``length``, ``tool_calls``, ``content_filter``). Anything a protocol
has that the others cannot express is either mapped (reasoning effort ↔ thinking budgets, tool
namespaces ↔ flat names) or dropped at the edge, and the edge says which (docs/api.md, "Translation").

It is only used when a request goes to an upstream of another protocol: a request to an upstream
of its own protocol passes through untouched, whatever it carries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from app.tokens.delivered import Delivered
from domain.usage import TokenUsage


@dataclass(slots=True)
class Text:
    text: str
    cache_control: dict[str, Any] | None = None


@dataclass(slots=True)
class Image:
    """An image as base64 data with its media type, or as a URL."""

    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    cache_control: dict[str, Any] | None = None


@dataclass(slots=True)
class File:
    """A document (a PDF, say) as base64 data with its media type, or as a URL."""

    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    filename: str | None = None


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    #: JSON text for a function (as OpenAI carries it); the raw input for a ``custom`` tool.
    arguments: str
    namespace: str | None = None
    custom: bool = False


@dataclass(slots=True)
class ToolResult:
    call_id: str
    content: list[Text | Image | File]
    is_error: bool = False
    custom: bool = False  # the output of a custom tool's call


@dataclass(slots=True)
class Thinking:
    """Reasoning, with the provider's opaque state that lets it be sent back on the next turn:
    Anthropic's ``signature`` (or a ``redacted`` block's data), or an OpenAI reasoning item's id and
    ``encrypted`` content. Each upstream takes back only its own kind (``app/translate/reasoning.py``)."""

    text: str
    signature: str | None = None
    redacted: str | None = None
    item_id: str | None = None
    encrypted: str | None = None

    @property
    def anthropic(self) -> bool:
        return bool(self.signature or self.redacted)

    @property
    def openai(self) -> bool:
        return bool(self.encrypted)


Part = Text | Image | File | ToolCall | ToolResult | Thinking
Role = Literal["user", "assistant", "system"]


@dataclass(slots=True)
class Message:
    """A turn. ``system``: a system or developer message in the middle of the conversation."""

    role: Role
    parts: list[Part]


def append_turn(messages: list[Message], role: Role, parts: list[Part]) -> None:
    """Add parts as a turn, joining them to the last turn when it has the same role (tool results and
    the user's next words, or several tool calls, belong to one turn)."""
    if messages and messages[-1].role == role:
        messages[-1].parts.extend(parts)
    else:
        messages.append(Message(role, parts))


@dataclass(slots=True)
class Tool:
    name: str
    description: str | None
    parameters: dict[str, Any]
    #: The group it belongs to (a Responses ``namespace`` tool), mapped back on its calls.
    namespace: str | None = None
    #: A ``custom`` tool: its input is free text (in ``format``'s grammar, if any), not JSON.
    custom: bool = False
    format: dict[str, Any] | None = None
    strict: bool | None = None
    cache_control: dict[str, Any] | None = None


@dataclass(slots=True)
class BuiltinTool:
    """A tool the provider runs itself (web search, code execution, …), as the client sent it."""

    name: str
    spec: dict[str, Any]


@dataclass(slots=True)
class NamedTool:
    name: str
    namespace: str | None = None


ToolMode = Literal["auto", "none", "required"]
ToolChoice = ToolMode | NamedTool
ThinkingMode = Literal["enabled", "adaptive", "disabled"]
TOOL_MODES: tuple[ToolMode, ...] = ("auto", "none", "required")
#: The modes an ``allowed_tools`` choice may name (OpenAI's chat and Responses).
ALLOWED_TOOLS_MODES: tuple[ToolMode, ...] = ("auto", "required")
THINKING_MODES: tuple[ThinkingMode, ...] = ("enabled", "adaptive", "disabled")

_Option = TypeVar("_Option", bound=str)


def one_of(value: object, options: tuple[_Option, ...]) -> _Option | None:
    """``value`` as the option it equals (typed as the options are), or None: how a client's string
    becomes one of the canonical model's literal values."""
    for option in options:
        if value == option:
            return option
    return None


@dataclass(slots=True)
class Request:
    model: str
    messages: list[Message]
    system: list[Text] = field(default_factory=list)
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: list[str] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    builtin_tools: list[BuiltinTool] = field(default_factory=list)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    effort: str | None = None
    #: Anthropic's thinking switch as the client set it; ``None``: by ``effort``.
    thinking: ThinkingMode | None = None
    #: Whether (and how) the client wants to read the reasoning: a Responses ``reasoning.summary``.
    reasoning_summary: str | None = None
    response_format: dict[str, Any] | None = None
    verbosity: str | None = None
    user: str | None = None
    metadata: dict[str, Any] | None = None
    store: bool | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    stream: bool = False
    #: Built-in tools taken out of the request (named in ``x-tollgate-dropped-tools``).
    dropped_tools: list[str] = field(default_factory=list)


Finish = Literal["stop", "length", "tool_calls", "content_filter"]


@dataclass(slots=True)
class Response:
    id: str
    model: str
    parts: list[Text | ToolCall | Thinking]
    finish: Finish
    usage: TokenUsage | None
    stop_sequence: str | None = None
    reasoning_tokens: int = 0

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, Text))


# -- stream events --------------------------------------------------------------------------------


@dataclass(slots=True)
class TextDelta:
    text: str


@dataclass(slots=True)
class ThinkingDelta:
    text: str


@dataclass(slots=True)
class ThinkingSealed:
    """The opaque state of the reasoning just streamed (see :class:`Thinking`); ends that reasoning."""

    signature: str | None = None
    redacted: str | None = None
    item_id: str | None = None
    encrypted: str | None = None


@dataclass(slots=True)
class ToolCallStarted:
    id: str
    name: str
    namespace: str | None = None
    custom: bool = False


@dataclass(slots=True)
class ToolArgumentsDelta:
    fragment: str


@dataclass(slots=True)
class Finished:
    reason: Finish
    stop_sequence: str | None = None


@dataclass(slots=True)
class UsageReported:
    """Usage so far; later reports replace earlier ones (Anthropic's counts are cumulative).
    ``partial``: reported before the answer (Anthropic's ``message_start``): its prompt count is
    the upstream's, its output count is not the answer's."""

    usage: TokenUsage
    reasoning_tokens: int = 0
    partial: bool = False


Event = TextDelta | ThinkingDelta | ThinkingSealed | ToolCallStarted | ToolArgumentsDelta | Finished | UsageReported


def deliver(event: Event, delivered: Delivered) -> None:
    """Note what a client was sent, for billing a stream that ended without (complete) usage."""
    if isinstance(event, TextDelta):
        delivered.text(event.text)
    elif isinstance(event, ThinkingDelta):
        delivered.thinking(event.text)
    elif isinstance(event, ToolCallStarted):
        delivered.tool_call(event.name)
    elif isinstance(event, ToolArgumentsDelta):
        delivered.arguments(event.fragment)


def deliver_answer(parts: list[Text | ToolCall | Thinking], delivered: Delivered) -> None:
    """Note a whole answer's parts (an upstream that answered without usage)."""
    for part in parts:
        if isinstance(part, Text):
            delivered.text(part.text)
        elif isinstance(part, Thinking):
            delivered.thinking(part.text)
        else:
            delivered.tool_call(part.name)
            delivered.arguments(part.arguments)


# -- mappings shared by the codecs ---------------------------------------------------------------

#: Effort levels from least to most; a request's effort is mapped onto the model's levels.
EFFORT_SCALE = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


def effort_for_model(requested: str | None, levels: list[str]) -> str | None:
    """The model's level for a requested effort: itself if offered, else the nearest one."""
    if requested is None or not levels:
        return None
    if requested in levels:
        return requested
    rank = {name: i for i, name in enumerate(EFFORT_SCALE)}
    if requested not in rank:
        return None
    known = [level for level in levels if level in rank]
    if not known:
        return None
    return min(known, key=lambda level: (abs(rank[level] - rank[requested]), -rank[level]))


#: Anthropic thinking budgets (tokens) for effort levels, and back.
THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768, "max": 65536}


def effort_from_budget(budget: int) -> str:
    for level in ("minimal", "low", "medium", "high", "xhigh"):
        if budget <= THINKING_BUDGETS[level]:
            return level
    return "max"


_TOOL_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def safe_tool_id(call_id: str) -> str:
    """Anthropic accepts ``^[a-zA-Z0-9_-]+$``; other providers' ids are mapped the same way on
    both the call and its result, so they still match."""
    return _TOOL_ID_UNSAFE.sub("_", call_id) or "call"
