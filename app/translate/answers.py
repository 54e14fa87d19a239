"""A whole answer passed through (a plain request to an upstream of the client's own protocol): read
for its bill, and written back with what Tollgate adds.

The upstream's answer is read once into its top-level members, each kept as raw JSON text
(:class:`~app.upstream.base.Answer`). Its bill needs only its ``usage``, decoded alone; only an
answer without usage is decoded whole, to count what it answered. It goes back to the client as its
members written again around the two Tollgate changes — ``model`` (the id the client asked for) and
``usage`` (with ``cost`` and ``remaining``) — so the rest of it (its text, tool calls, logprobs) is
copied as the upstream wrote it, never decoded into objects and encoded again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.json import encode, object_or
from app.translate import canonical as c
from app.upstream.base import Answer
from domain.usage import TokenUsage


def read_passed(
    answer: Answer,
    usage_of: Callable[[Any, Answer], TokenUsage | None],
    reasoning_of: Callable[[Any], int],
    decode: Callable[[dict[str, Any]], c.Response],
) -> c.Response:
    """What the bill needs of an answer: its reported usage (``usage_of`` the answer's ``usage`` and
    whatever other member it needs, such as the tier served; the parts left empty: nothing is
    counted when the upstream counted), or, without one, the whole answer decoded (``decode``) to count."""
    usage = answer.member("usage")
    reported = usage_of(usage, answer)
    if reported is None:
        return decode(answer.json())
    return c.Response(id="", model="", parts=[], finish="stop", usage=reported, reasoning_tokens=reasoning_of(usage))


def render_passed(answer: Answer, model_id: str, usage_dict: dict[str, Any], extra_usage: dict[str, Any]) -> bytes:
    """The answer as the client gets it: every member as the upstream wrote it, in its place, but
    ``model`` (the client's id) and ``usage`` (the upstream's, or ``usage_dict`` if it sent none,
    with ``extra_usage`` after it); a member the upstream did not send comes last."""
    reported = object_or(answer.member("usage"), usage_dict)
    return encode({**answer.members, "model": model_id, "usage": {**reported, **extra_usage}})
