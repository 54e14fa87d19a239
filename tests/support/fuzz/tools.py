"""Generated requests declaring built-in (provider-run) tools, whose ``type`` is drawn from the whole
Unicode range.

The finding: a translated request with a built-in tool whose type was not Latin-1, or held a CR or
LF, was charged, and then its answer could not be sent (its head names each dropped tool). So the
types here are any text — NUL, CR and LF, every control character, bidirectional controls,
characters past Latin-1 and past the Basic Multilingual Plane — besides the real ones and values
that are not text at all, with a ``name`` or not, among the client's own function tools, on models
that pass, drop or refuse built-in tools, passed through and translated, plain and streamed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from tests.support.fuzz.attribution import ANY_CHAR, BIDI, CONTROLS

#: Each endpoint's models: passed through (the default policy: pass), translated (the default:
#: drop), and those whose ``builtin_tools`` setting passes, drops or refuses them.
MODELS = {
    "chat": ["fake-gpt", "fake-claude", "passing-gpt", "dropping-claude", "refusing-claude"],
    "responses": ["fake-codex", "fake-gpt", "fake-claude", "dropping-claude", "refusing-claude"],
    "messages": ["fake-claude", "fake-gpt", "fake-codex", "passing-gpt", "dropping-claude", "refusing-claude"],
}
REAL_TYPES = [
    "web_search",
    "web_search_preview",
    "file_search",
    "code_interpreter",
    "web_search_20250305",
    "code_execution_20250522",
    "bash_20250124",
    "text_editor_20250429",
    "computer_use_preview",
    "mcp",
]


@st.composite
def _tool_type(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["any", "any", "any", "real", "control", "astral", "not_text"]))
    if kind == "real":
        return draw(st.sampled_from(REAL_TYPES))
    if kind == "control":
        return (
            draw(st.text("websarch_", max_size=6))
            + draw(st.sampled_from([*CONTROLS, *BIDI]))
            + draw(st.text("_2025", max_size=5))
        )
    if kind == "astral":
        return draw(st.text(st.characters(min_codepoint=0x100), min_size=1, max_size=8))
    if kind == "not_text":
        return draw(
            st.one_of(
                st.integers(),
                st.none(),
                st.booleans(),
                st.lists(st.integers(), max_size=2),
                st.dictionaries(st.text(max_size=3), st.integers(), max_size=1),
            )
        )
    return draw(st.text(ANY_CHAR.filter(lambda c: not 0xD800 <= ord(c) <= 0xDFFF), min_size=0, max_size=16))


@st.composite
def _builtin(draw: st.DrawFn) -> dict[str, Any]:
    tool: dict[str, Any] = {"type": draw(_tool_type())}
    if draw(st.booleans()):
        tool["name"] = draw(
            st.one_of(
                st.text(ANY_CHAR.filter(lambda c: not 0xD800 <= ord(c) <= 0xDFFF), max_size=10),
                st.sampled_from(["web_search", "bash", "str_replace_based_edit_tool"]),
            )
        )
    for extra in draw(st.lists(st.sampled_from(["max_uses", "user_location", "search_context_size", "x"]), max_size=2)):
        tool[extra] = draw(st.one_of(st.integers(-1, 5), st.text(max_size=5), st.none()))
    return tool


def _function(endpoint: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    if endpoint == "chat":
        return {"type": "function", "function": {"name": "lookup", "parameters": schema}}
    if endpoint == "responses":
        return {"type": "function", "name": "lookup", "parameters": schema}
    return {"name": "lookup", "input_schema": schema}


@dataclass(frozen=True)
class ToolCase:
    """A request declaring built-in tools: the body as sent, the model it names, whether it asks for a
    stream, and the names a dropped tool may be reported under (each one's ``name`` or ``type``)."""

    body: bytes
    model: str
    stream: bool
    names: frozenset[str]


@st.composite
def tool_cases(draw: st.DrawFn, endpoint: str) -> ToolCase:
    model = draw(st.sampled_from(MODELS[endpoint]))
    builtins = draw(st.lists(_builtin(), min_size=1, max_size=3))
    tools = [*builtins, *([_function(endpoint)] * draw(st.integers(0, 1)))]
    tools = draw(st.permutations(tools))
    hi = [{"role": "user", "content": "hello tools"}]
    body: dict[str, Any]
    if endpoint == "responses":
        body = {"model": model, "input": "hello tools", "tools": tools}
    else:
        body = {"model": model, "messages": hi, "tools": tools}
        if endpoint == "messages":
            body["max_tokens"] = 16
    if draw(st.integers(0, 4)) == 0:
        chosen = draw(st.sampled_from(builtins))
        body["tool_choice"] = {"type": chosen["type"], **({"name": chosen["name"]} if "name" in chosen else {})}
    if endpoint == "chat" and draw(st.integers(0, 5)) == 0:
        body["web_search_options"] = {}
    if endpoint == "messages" and draw(st.integers(0, 5)) == 0:
        body["mcp_servers"] = [{"type": "url", "url": "https://example.com/sse", "name": "x"}]
    stream = draw(st.booleans())
    if stream:
        body["stream"] = True
    names = {str(t.get("name") or t.get("type")) for t in builtins} | {str(t.get("type")) for t in builtins}
    raw = json.dumps(body, ensure_ascii=draw(st.booleans())).encode()
    return ToolCase(raw, model, stream, frozenset(names | {"web_search", "mcp_servers"}))


def explicit(endpoint: str) -> list[ToolCase]:
    """The findings' inputs: a translated request with a built-in tool typed past Latin-1, and one
    typed with a line break, plain and streamed; and a built-in typed with a list, chosen by
    ``tool_choice``, on a model that drops built-in tools (a 500, found by the long run)."""
    translated = MODELS[endpoint][1]
    cases = []
    for model, kind, stream in (
        (translated, "网络搜索", False),
        (translated, "web\r\nsearch", True),
        (translated, "web\x00search\u202e", False),
        ("dropping-claude", [6], False),
    ):
        tools = [{"type": kind}]
        if endpoint == "responses":
            body: dict[str, Any] = {"model": model, "input": "hi", "tools": tools}
        else:
            body = {
                "model": model,
                "messages": [{"role": "user", "content": "hi"}],
                "tools": tools,
                **({"max_tokens": 16} if endpoint == "messages" else {}),
            }
        if isinstance(kind, list):
            body["tool_choice"] = {"type": kind}
        if stream:
            body["stream"] = True
        cases.append(ToolCase(json.dumps(body).encode(), model, stream, frozenset({str(kind)})))
    return cases
