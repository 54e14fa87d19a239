"""Tools between protocols: flat names for upstreams without namespaces, and built-in tools.

The Responses API groups function tools in ``namespace`` tools and has ``custom`` tools whose input
is free text; Chat Completions providers and Anthropic have neither. Their tools go there as plain
functions — a namespaced one as ``<namespace>__<name>``, a custom one taking one string, ``input``
— under names that are unique and valid everywhere (``^[a-zA-Z0-9_-]{1,64}$``). :class:`ToolNames`
remembers every name it gave, so a call the upstream makes is mapped back to the client's tool
(its namespace, its free-text input), in whole answers and in streams alike.

Built-in tools are run by the provider (web search, code execution, …): one provider's cannot be
run by another. A request passed to an upstream of its own protocol keeps them; a translated one
drops them by default, and a model's ``builtin_tools`` setting may pass, drop or refuse them.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from app.errors import InvalidRequest
from app.translate import canonical as c

SEPARATOR = "__"
_NAME_LIMIT = 64
_VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INVALID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")

#: The input schema a custom (free-text) tool gets as a function.
_CUSTOM_PARAMETERS = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}


class ToolNames:
    """The names a request's tools go by at its upstream, and the way back to the client's tools.

    ``flatten``: the upstream has no namespaces or custom tools (chat completions, Anthropic)."""

    def __init__(self, tools: list[c.Tool], *, flatten: bool) -> None:
        self.flatten = flatten
        self._tools: dict[str, c.Tool] = {}  # by the upstream's name
        self._names: dict[tuple[str | None, str], str] = {}  # (namespace, name) → the upstream's name
        self._buffering: c.ToolCallStarted | None = None  # a custom tool's call, its JSON held back
        self._buffer: list[str] = []
        for tool in tools:
            name = self._unique(tool) if flatten else tool.name
            self._tools[name] = tool
            self._names[(tool.namespace, tool.name)] = name

    def _unique(self, tool: c.Tool) -> str:
        flat = tool.name if tool.namespace is None else f"{tool.namespace}{SEPARATOR}{tool.name}"
        if _VALID.match(flat) and flat not in self._tools:
            return flat
        safe = _INVALID_CHARS.sub("_", flat)
        digest = hashlib.sha256(flat.encode()).hexdigest()
        for length in range(8, 65):
            candidate = f"{safe[: _NAME_LIMIT - length - 1]}_{digest[:length]}"
            if candidate not in self._tools:
                return candidate
        raise InvalidRequest(f"Too many tools named like {flat!r}.", param="tools")

    def upstream_name(self, name: str, namespace: str | None = None) -> str:
        return self._names.get(
            (namespace, name), name if not self.flatten or namespace is None else f"{namespace}{SEPARATOR}{name}"
        )

    def definition(self, tool: c.Tool) -> tuple[str, str | None, dict[str, Any]]:
        """(name, description, JSON schema) of a tool as a plain function at the upstream (a tool
        without parameters takes an empty object)."""
        if not (self.flatten and tool.custom):
            return (
                self.upstream_name(tool.name, tool.namespace),
                tool.description,
                tool.parameters or {"type": "object", "properties": {}},
            )
        description = tool.description or ""
        fmt = tool.format or {}
        if fmt.get("type") == "grammar":
            description += (
                f"\n\nThe `input` is text in this {fmt.get('syntax', 'grammar')} grammar:\n{fmt.get('definition', '')}"
            )
        return self.upstream_name(tool.name, tool.namespace), description.strip() or None, _CUSTOM_PARAMETERS

    def call_arguments(self, call: c.ToolCall) -> str:
        """A call's arguments as the upstream's function takes them (a custom tool's text, wrapped)."""
        return json.dumps({"input": call.arguments}) if self.flatten and call.custom else call.arguments

    # -- the way back ------------------------------------------------------------------------

    def call(self, call: c.ToolCall) -> c.ToolCall:
        """A call from the upstream, as the client's tool."""
        tool = self._tools.get(call.name)
        if tool is None:
            return call
        arguments = _custom_input(call.arguments) if self.flatten and tool.custom else call.arguments
        return c.ToolCall(call.id, tool.name, arguments, tool.namespace, tool.custom)

    def answer(self, response: c.Response) -> c.Response:
        response.parts = [self.call(p) if isinstance(p, c.ToolCall) else p for p in response.parts]
        return response

    def events(self, events: list[c.Event]) -> list[c.Event]:
        """Stream events from the upstream, with tool calls mapped back; a flattened custom tool's
        JSON arguments are held until its call ends, then sent as its text input."""
        out: list[c.Event] = []
        for event in events:
            if self._buffering is not None:
                if isinstance(event, c.ToolArgumentsDelta):
                    self._buffer.append(event.fragment)
                    continue
                out.append(c.ToolArgumentsDelta(_custom_input("".join(self._buffer))))
                self._buffering, self._buffer = None, []
            if isinstance(event, c.ToolCallStarted):
                tool = self._tools.get(event.name)
                if tool is not None:
                    event = c.ToolCallStarted(event.id, tool.name, tool.namespace, tool.custom)
                    if self.flatten and tool.custom:
                        self._buffering = event
            out.append(event)
        return out


def _custom_input(arguments: str) -> str:
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return arguments
    if isinstance(value, dict) and isinstance(text := value.get("input"), str):
        return text
    return arguments


# -- built-in tools ---------------------------------------------------------------------------------

#: The tool types each protocol's clients define themselves (the first: a tool without a type);
#: any other type is a built-in.
_CLIENT_TOOLS: dict[str, tuple[str | None, ...]] = {
    "chat": ("function", "custom"),
    "responses": ("function", "custom", "namespace"),
    "messages": (None, "custom"),
}


#: The members of a Gemini ``Tool`` that declare the client's own functions (the rest are Google's tools).
GEMINI_FUNCTIONS = frozenset({"functionDeclarations", "function_declarations"})


def builtin_name(tool: Any, protocol: str) -> str | None:
    """The name of a built-in tool (its type), or None for a tool the client runs itself."""
    if not isinstance(tool, dict):
        return None
    if protocol == "gemini":  # a Tool object: its built-ins are its members but the functions
        return next((str(k) for k in tool if k not in GEMINI_FUNCTIONS), None)
    kind = tool.get("type", _CLIENT_TOOLS[protocol][0])
    if kind in _CLIENT_TOOLS[protocol]:
        return None
    return str(kind)


def builtin_names(body: dict[str, Any], protocol: str) -> list[str]:
    """The built-in tools a request body asks for, in its own protocol."""
    tools = body.get("tools")
    names = [n for t in tools if (n := builtin_name(t, protocol))] if isinstance(tools, list) else []
    if protocol == "chat" and body.get("web_search_options") is not None:
        names.append("web_search")
    if protocol == "messages" and body.get("mcp_servers"):
        names.append("mcp_servers")
    return names


def without_builtins(body: dict[str, Any], protocol: str) -> dict[str, Any]:
    """The body with its built-in tools taken out (and a tool choice that named one)."""
    out = dict(body)
    tools = body.get("tools")
    if protocol == "gemini" and isinstance(tools, list):
        tools = [{k: v for k, v in t.items() if k in GEMINI_FUNCTIONS} if isinstance(t, dict) else t for t in tools]
        tools = [t for t in tools if t]
        body = {**body, "tools": tools}
    if isinstance(tools, list):
        kept = [t for t in tools if builtin_name(t, protocol) is None]
        dropped = {str(t.get("name") or t.get("type")) for t in tools if builtin_name(t, protocol) is not None}
        if kept:
            out["tools"] = kept
        else:
            out.pop("tools", None)
        if not kept or _names_one_of(body.get("tool_choice"), dropped):
            out.pop("tool_choice", None)
    out.pop("web_search_options" if protocol == "chat" else "mcp_servers" if protocol == "messages" else "", None)
    return out


def _names_one_of(choice: Any, dropped: set[str]) -> bool:
    """Whether a tool choice names one of the ``dropped`` tools, by its ``name`` or its ``type`` read
    as a dropped tool's name is (``str``: a client may send any JSON there, a list included)."""
    if not isinstance(choice, dict):
        return False
    return any(value is not None and str(value) in dropped for value in (choice.get("name"), choice.get("type")))


def policy(setting: str | None, *, passthrough: bool) -> str:
    """A model's policy for built-in tools; by default pass them where they go to their own
    protocol, drop them where the request is translated."""
    return setting or ("pass" if passthrough else "drop")


def refuse_builtins(names: list[str], model_id: str) -> None:
    if names:
        raise InvalidRequest(
            f"The model `{model_id}` does not take built-in tools ({', '.join(names)}); remove them from 'tools'.",
            param="tools",
        )


def settle_builtins(req: c.Request, setting: str | None, model_id: str) -> None:
    """Apply the model's policy to a translated request's built-in tools (``pass``: they go to the
    upstream as the client wrote them, for it to judge)."""
    if not req.builtin_tools:
        return
    chosen = policy(setting, passthrough=False)
    names = [tool.name for tool in req.builtin_tools]
    if chosen == "refuse":
        refuse_builtins(names, model_id)
    if chosen == "drop":
        req.dropped_tools.extend(names)
        req.builtin_tools = []
        if isinstance(req.tool_choice, c.NamedTool) and req.tool_choice.name in names:
            req.tool_choice = None
