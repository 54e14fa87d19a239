"""Tool names across protocols: flattened for upstreams without namespaces or custom tools, and
mapped back exactly, in whole answers and in streams; built-in tools found, dropped or refused."""

from __future__ import annotations

import json

import pytest

from app.errors import InvalidRequest
from app.translate import canonical as c
from app.translate import tools

TOOLS = [
    c.Tool("exec_command", "Run a command", {"type": "object"}),
    c.Tool("close_agent", "Close an agent", {"type": "object"}, namespace="multi_agent_v1"),
    c.Tool(
        "apply_patch",
        "Patch files",
        {},
        custom=True,
        format={"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
    ),
    c.Tool("multi_agent_v1__close_agent", "A plain tool whose name collides", {"type": "object"}),
    c.Tool("x" * 40, None, {}, namespace="n" * 40),
]


def test_namespaced_and_custom_tools_become_plain_functions_with_unique_valid_names():
    names = tools.ToolNames(TOOLS, flatten=True)
    flat = [names.definition(tool)[0] for tool in TOOLS]
    assert flat[:3] == ["exec_command", "multi_agent_v1__close_agent", "apply_patch"]
    assert len(set(flat)) == len(flat)
    assert all(tools._VALID.match(name) for name in flat)
    _, description, schema = names.definition(TOOLS[2])
    assert schema == {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}
    assert "lark" in description
    assert "start: /.+/" in description


def test_calls_map_back_to_the_client_s_tools():
    names = tools.ToolNames(TOOLS, flatten=True)
    flat = {tool.name: names.definition(tool)[0] for tool in TOOLS}
    call = names.call(c.ToolCall("call_1", "multi_agent_v1__close_agent", '{"id": "a"}'))
    assert (call.name, call.namespace, call.custom) == ("close_agent", "multi_agent_v1", False)
    collided = names.call(c.ToolCall("call_2", flat["multi_agent_v1__close_agent"], "{}"))
    assert (collided.name, collided.namespace) == ("multi_agent_v1__close_agent", None)
    patch = names.call(c.ToolCall("call_3", "apply_patch", json.dumps({"input": "*** Begin Patch\n"})))
    assert (patch.name, patch.custom, patch.arguments) == ("apply_patch", True, "*** Begin Patch\n")
    long = names.call(c.ToolCall("call_4", flat["x" * 40], "{}"))
    assert (long.name, long.namespace) == ("x" * 40, "n" * 40)
    # and the way there, for calls in the history
    assert names.upstream_name("close_agent", "multi_agent_v1") == "multi_agent_v1__close_agent"
    assert json.loads(names.call_arguments(c.ToolCall("c", "apply_patch", "diff", custom=True))) == {"input": "diff"}


def test_a_custom_tool_s_streamed_json_is_held_and_sent_as_its_text():
    names = tools.ToolNames(TOOLS, flatten=True)
    events = names.events(
        [
            c.ToolCallStarted("call_1", "apply_patch"),
            c.ToolArgumentsDelta('{"inp'),
            c.ToolArgumentsDelta('ut": "a\\nb"}'),
        ]
    )
    assert events == [c.ToolCallStarted("call_1", "apply_patch", None, True)]
    assert names.events([c.Finished("tool_calls")]) == [c.ToolArgumentsDelta("a\nb"), c.Finished("tool_calls")]
    streamed = names.events([c.ToolCallStarted("call_2", "multi_agent_v1__close_agent"), c.ToolArgumentsDelta("{}")])
    assert streamed == [c.ToolCallStarted("call_2", "close_agent", "multi_agent_v1"), c.ToolArgumentsDelta("{}")]


def test_without_flattening_names_are_the_client_s():
    names = tools.ToolNames(TOOLS, flatten=False)
    assert names.definition(TOOLS[1])[0] == "close_agent"
    assert names.call(c.ToolCall("c", "close_agent", "{}", "multi_agent_v1")).namespace == "multi_agent_v1"


@pytest.mark.parametrize(
    ("protocol", "body", "builtins"),
    [
        (
            "chat",
            {
                "tools": [{"type": "function", "function": {"name": "f"}}, {"type": "web_search"}],
                "web_search_options": {},
            },
            ["web_search", "web_search"],
        ),
        (
            "responses",
            {
                "tools": [
                    {"type": "function", "name": "f"},
                    {"type": "namespace", "name": "n", "tools": []},
                    {"type": "custom", "name": "p"},
                    {"type": "web_search", "external_web_access": False},
                ]
            },
            ["web_search"],
        ),
        (
            "messages",
            {
                "tools": [
                    {"name": "f", "input_schema": {}},
                    {"type": "custom", "name": "g", "input_schema": {}},
                    {"type": "web_search_20250305", "name": "web_search"},
                    {"type": "code_execution_20250825", "name": "code_execution"},
                ]
            },
            ["web_search_20250305", "code_execution_20250825"],
        ),
    ],
)
def test_built_in_tools_are_told_apart_from_the_client_s(protocol, body, builtins):
    assert tools.builtin_names(body, protocol) == builtins
    kept = tools.without_builtins(body, protocol)
    assert tools.builtin_names(kept, protocol) == []
    assert kept["tools"]


def test_a_tool_choice_naming_a_dropped_built_in_goes_with_it():
    body = {
        "tools": [{"type": "web_search_20250305", "name": "web_search"}],
        "tool_choice": {"type": "tool", "name": "web_search"},
    }
    assert tools.without_builtins(body, "messages") == {}


@pytest.mark.parametrize("kind", [[6], [], {"a": 1}])
def test_a_built_in_typed_with_json_that_is_not_text_is_dropped_with_the_choice_naming_it(kind):
    """Found by fuzzing: a tool choice whose type was a list (as the tool's) was looked up in the set of
    dropped names, a TypeError and a 500 (``dropping-claude``, a model that drops built-in tools)."""
    body = {"tools": [{"type": kind}, {"name": "f", "input_schema": {}}], "tool_choice": {"type": kind}}
    assert tools.builtin_names(body, "messages") == [str(kind)]
    assert tools.without_builtins(body, "messages") == {"tools": [{"name": "f", "input_schema": {}}]}
    kept = {**body, "tool_choice": {"type": "tool", "name": ["f"]}}
    assert tools.without_builtins(kept, "messages")["tool_choice"] == {"type": "tool", "name": ["f"]}


def test_the_policy_drops_refuses_or_passes_built_ins_of_a_translated_request():
    def request() -> c.Request:
        return c.Request(
            "m",
            [],
            builtin_tools=[c.BuiltinTool("web_search", {"type": "web_search"})],
            tool_choice=c.NamedTool("web_search"),
        )

    dropped = request()
    tools.settle_builtins(dropped, None, "m")
    assert dropped.dropped_tools == ["web_search"]
    assert not dropped.builtin_tools
    assert dropped.tool_choice is None
    passed = request()
    tools.settle_builtins(passed, "pass", "m")
    assert passed.builtin_tools
    assert not passed.dropped_tools
    with pytest.raises(InvalidRequest, match="web_search"):
        tools.settle_builtins(request(), "refuse", "m")
