"""What a request body could make the upstream bill beyond its tokens: the service tiers it may be
served at, and the provider-run tool calls it may make. A hold covers the dearest of them
(``domain.pricing.worst_case_in_micros``); the charge is made for what the upstream reports.
"""

from __future__ import annotations

from typing import Any

from domain.pricing import Exposure

#: A declared provider-run tool with no stated bound is held for this many calls (the charge is
#: for the calls reported, whatever the hold: a hold only decides what must be available first).
HELD_TOOL_CALLS = 5
#: Tier names a request uses for the base price (OpenAI's ``default``, Anthropic's ``standard_only``).
_BASE_ONLY = frozenset({"default", "standard_only"})
#: The billed tool a declared built-in tool's type (its prefix) stands for, by wire.
_TOOLS = {
    "web_search": "web_search",
    "web_fetch": "web_fetch",
    "file_search": "file_search",
    "code_interpreter": "code_interpreter",
}


def exposure_of(body: dict[str, Any], wire: str) -> Exposure:
    """The exposure of ``body`` as it goes to an upstream speaking ``wire``."""
    tier = body.get("service_tier")
    tiers: frozenset[str] | None = None  # unset or "auto" (or not a tier at all): the account's default
    if isinstance(tier, str) and tier in _BASE_ONLY:
        tiers = frozenset()
    elif isinstance(tier, str) and tier != "auto":
        tiers = frozenset({tier})
    calls: dict[str, int] = {}
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            continue
        billed = next((name for prefix, name in _TOOLS.items() if tool["type"].startswith(prefix)), None)
        if billed is not None:
            bound = tool.get("max_uses")
            most = bound if isinstance(bound, int) and not isinstance(bound, bool) and bound > 0 else HELD_TOOL_CALLS
            calls[billed] = calls.get(billed, 0) + most
    if wire == "chat" and body.get("web_search_options") is not None:
        calls["web_search"] = calls.get("web_search", 0) + 1  # a search model searches once per request
    return Exposure(tiers, calls)
