"""The token-counting rules, written down once: how many tokens text, images, messages and tools
cost, for each family of models.

Three rule sets, chosen per model by ``tokenizer`` (default: by upstream kind):

``o200k`` (OpenAI-compatible and demo upstreams)
    Text is counted with OpenAI's own o200k_base tokenizer: exact. Messages add OpenAI's documented
    chat framing (3 tokens per message, the role's tokens, 1 more for a ``name``, 3 to prime the
    reply). Tool definitions are counted as their JSON text plus a fixed overhead, which is more than
    OpenAI's own compact rendering of them (an upper bound, checked in the tests against the
    published counting recipe). Images follow OpenAI's tile rule.

``anthropic`` (Anthropic upstreams)
    Anthropic publishes no tokenizer for its current models, so this is an estimate with a margin,
    not a proof: each piece of text counts ``ceil(1.5 × its o200k tokens)`` plus one token per
    non-ASCII character (Claude's smaller vocabulary splits non-Latin scripts much finer than
    o200k), but never more than its UTF-8 bytes (no byte-level BPE token is shorter than a byte).
    Measured against the last tokenizer Anthropic did publish (Claude 2's, shipped as tokenizer.json
    in the anthropic SDK up to 0.34), this overcounts English and code by 1.2–1.5× (digits and hex up
    to 1.9×) and non-Latin scripts by 1.1–2.2×, and lands within about ±7% on other European
    languages (the worst undercounts seen: Vietnamese and Thai, −16% and −9%). Images follow
    Anthropic's documented ``width × height / 750``; tool definitions add the tool-use system
    prompt Anthropic documents (346 tokens).

``bytes`` (any other provider)
    The provable upper bound for byte-level BPE tokenizers: one token per UTF-8 byte, a generous
    fixed bound per image.

A count is only ever used as an upper bound (context-window checks, holds) or when the upstream
reports no usage, so every rounding goes up.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from app.tokens.encoding import count_o200k
from app.tokens.image_size import Size

TokenizerName = Literal["o200k", "anthropic", "bytes"]
Detail = str | None


# -- text --------------------------------------------------------------------------------------------


def o200k_text(text: str) -> int:
    return count_o200k(text)


#: The Anthropic estimate's factor over o200k for text (see the module's docstring for the margin).
ANTHROPIC_TEXT_FACTOR = 1.5


def anthropic_text(text: str) -> int:
    """An estimate meant to stay above Claude's count: 1.5 × o200k plus one per non-ASCII character,
    capped by the UTF-8 size (bytes bound any byte-level BPE, so the cap never goes below what a
    byte-level tokenizer can produce)."""
    if not text:
        return 0
    if text.isascii():
        size, extra = len(text), 0
    else:
        size = len(text.encode())
        extra = len(text) - len(text.encode("ascii", "ignore"))
    if size <= 1:
        return size
    return min(math.ceil(count_o200k(text) * ANTHROPIC_TEXT_FACTOR) + extra, size)


def utf8_bytes(text: str) -> int:
    return len(text.encode())


# -- images ------------------------------------------------------------------------------------------

OPENAI_LOW_DETAIL = 85
OPENAI_TILE = 170
#: The most a high-detail image can cost (768 × 2048 after rescaling: 2 × 4 tiles).
OPENAI_IMAGE_MAX = OPENAI_LOW_DETAIL + OPENAI_TILE * 8


def openai_image(size: Size | None, detail: Detail) -> int:
    """OpenAI's rule: ``low`` is 85 tokens; otherwise the image is fitted into 2048 × 2048, then its
    shortest side brought down to 768 px, and costs 85 + 170 per 512-px tile. Unknown size: the
    most the detail level can cost."""
    if detail == "low":
        return OPENAI_LOW_DETAIL
    if size is None:
        return OPENAI_IMAGE_MAX
    width, height = float(size[0]), float(size[1])
    if max(width, height) > 2048:
        scale = 2048 / max(width, height)
        width, height = width * scale, height * scale
    if min(width, height) > 768:
        scale = 768 / min(width, height)
        width, height = width * scale, height * scale
    tiles = math.ceil(width / 512) * math.ceil(height / 512)
    return OPENAI_LOW_DETAIL + OPENAI_TILE * tiles


ANTHROPIC_LONG_EDGE = 1568
#: Anthropic scales larger images down to about 1,600 tokens; also the cost of an unknown size.
ANTHROPIC_IMAGE_MAX = 1600


def anthropic_image(size: Size | None, detail: Detail) -> int:
    """Anthropic's rule: the long edge is brought down to 1568 px, then ``width × height / 750``
    tokens, at most about 1,600 (larger images are scaled down to that). Unknown size: 1,600."""
    if size is None:
        return ANTHROPIC_IMAGE_MAX
    width, height = float(size[0]), float(size[1])
    if max(width, height) > ANTHROPIC_LONG_EDGE:
        scale = ANTHROPIC_LONG_EDGE / max(width, height)
        width, height = width * scale, height * scale
    return min(math.ceil(width * height / 750), ANTHROPIC_IMAGE_MAX)


#: Per image for unknown providers: above what OpenAI (1,445) or Anthropic (~1,600) charge.
BYTES_IMAGE_BOUND = 8_000


def bounded_image(size: Size | None, detail: Detail) -> int:
    return BYTES_IMAGE_BOUND


# -- the rule sets -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rules:
    """One family's counting rules; every constant is in tokens."""

    name: TokenizerName
    text: Callable[[str], int]
    image: Callable[[Size | None, Detail], int]
    per_message: int  # framing around every message (and the system prompt)
    per_name: int  # a message's ``name`` field
    per_request: int  # priming the reply, once
    per_tool_call: int  # framing around a tool call or a tool result in the history
    per_tool: int  # framing around one tool definition (its JSON text is counted as text)
    per_enum_value: int  # an ``enum`` value in a tool's schema, beyond its JSON text
    tools_preamble: int  # once, when the request defines tools


RULES: dict[TokenizerName, Rules] = {
    # OpenAI's chat format: <|start|>role<|message|>…<|end|> is 3 tokens plus the role; the reply
    # is primed with <|start|>assistant<|message|>. Tool definitions: OpenAI renders them compactly
    # (TypeScript-like); the published recipe charges 7 per function, 12 at the end and 3 per enum
    # value. Their JSON text costs more than that rendering for everything but enum values, which
    # JSON writes in about one token each beyond the value: hence 3 more per enum value.
    "o200k": Rules(
        "o200k",
        o200k_text,
        openai_image,
        per_message=3,
        per_name=1,
        per_request=3,
        per_tool_call=4,
        per_tool=10,
        per_enum_value=3,
        tools_preamble=12,
    ),
    # Anthropic: the tool-use system prompt is 346 tokens (tool_choice auto/none; 313 for any/tool).
    "anthropic": Rules(
        "anthropic",
        anthropic_text,
        anthropic_image,
        per_message=5,
        per_name=1,
        per_request=8,
        per_tool_call=5,
        per_tool=5,
        per_enum_value=3,
        tools_preamble=346,
    ),
    "bytes": Rules(
        "bytes",
        utf8_bytes,
        bounded_image,
        per_message=4,
        per_name=1,
        per_request=3,
        per_tool_call=4,
        per_tool=4,
        per_enum_value=3,
        tools_preamble=0,
    ),
}
