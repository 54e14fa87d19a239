"""The counting rules: exact o200k text, OpenAI's framing and tile rule, the Anthropic estimate."""

from __future__ import annotations

import math

import pytest

from app.tokens import prompt_tokens, rules_for
from app.tokens.counting import (
    ANTHROPIC_IMAGE_MAX,
    OPENAI_IMAGE_MAX,
    RULES,
    anthropic_image,
    anthropic_text,
    openai_image,
    utf8_bytes,
)
from app.tokens.encoding import count_o200k, o200k
from tests.support import images

O200K, ANTHROPIC, BYTES = RULES["o200k"], RULES["anthropic"], RULES["bytes"]

#: English, code, CJK, emoji, mixed scripts, whitespace runs.
CORPUS = [
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "def fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '7 days';",
    "人工智能正在改变世界。我们需要准确地计算令牌。",
    "東京都は日本の首都です。",
    "안녕하세요, 세계!",
    "Привет, мир! Как дела?",
    "مرحبا بالعالم",
    "🎉🚀👩‍👩‍👧‍👦 emoji 🇫🇷",
    "    indented\n\n\n\ttabs   and   spaces    ",
    '{"a": [1, 2, 3], "b": {"c": null}}',
    "a",
    "x" * 5000,
]

#: OpenAI's cookbook example ("How to count tokens with tiktoken"): the API reports 124 prompt
#: tokens for gpt-4o and gpt-4o-mini.
COOKBOOK_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate jargon "
        "into plain English.",
    },
    {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
    {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch "
        "base on opportunities for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client deliverable.",
    },
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}
WEATHER_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant that can answer to questions about the weather."},
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]


def cookbook_count(messages, tools=()):
    """OpenAI's published recipe for gpt-4o (messages, and function definitions), which the cookbook
    shows agreeing with the API's own prompt_tokens."""
    encode = o200k().encode
    total = 3
    for message in messages:
        total += 3 + sum(len(encode(value)) for value in message.values()) + (1 if "name" in message else 0)
    for tool in tools:
        fn = tool["function"]
        total += 7 + len(encode(fn["name"] + ":" + fn["description"].removesuffix(".")))
        properties = fn["parameters"]["properties"]
        if properties:
            total += 3
            for key, prop in properties.items():
                total += 3
                if "enum" in prop:
                    total += -3 + sum(3 + len(encode(item)) for item in prop["enum"])
                total += len(encode(f"{key}:{prop['type']}:{prop['description'].removesuffix('.')}"))
    return total + (12 if tools else 0)


def chat(messages, **extra):
    return {"model": "m", "messages": messages, **extra}


# -- text ----------------------------------------------------------------------------------------


def test_o200k_text_is_the_tokenizer_s_exact_count():
    assert O200K.text("hello world") == 2
    for text in CORPUS:
        assert O200K.text(text) == len(o200k().encode_ordinary(text))


@pytest.mark.parametrize("text", CORPUS)
def test_the_anthropic_estimate_is_one_and_a_half_o200k_plus_non_ascii_capped_by_bytes(text):
    o200k_count, size = count_o200k(text), len(text.encode())
    non_ascii = sum(1 for ch in text if ord(ch) > 127)
    assert anthropic_text(text) == min(math.ceil(1.5 * o200k_count) + non_ascii, size)
    assert o200k_count <= anthropic_text(text) <= size
    assert BYTES.text(text) == utf8_bytes(text) == size


def test_every_rule_set_counts_at_least_one_token_per_whitespace_separated_word():
    # The fake upstream's tokenizer: a lower bound no real BPE tokenizer goes under.
    for text in CORPUS:
        for rules in (O200K, ANTHROPIC, BYTES):
            assert rules.text(text) >= len(text.split())


# -- framing -------------------------------------------------------------------------------------


def test_chat_framing_matches_openai_s_cookbook_and_its_api_count():
    assert prompt_tokens(chat(COOKBOOK_MESSAGES), "chat", O200K) == cookbook_count(COOKBOOK_MESSAGES) == 124
    one = [{"role": "user", "content": "hello world"}]
    assert prompt_tokens(chat(one), "chat", O200K) == 3 + 1 + 2 + 3  # framing, role, text, reply priming


def test_tool_definitions_count_at_least_what_openai_s_recipe_does():
    assert cookbook_count(WEATHER_MESSAGES, [WEATHER_TOOL]) == 101  # the cookbook's API-confirmed figure
    colours = [
        "red",
        "green",
        "blue",
        "cyan",
        "magenta",
        "yellow",
        "black",
        "white",
        "orange",
        "purple",
        "pink",
        "brown",
        "gray",
        "teal",
    ] * 4
    enum_heavy = {
        "type": "function",
        "function": {
            "name": "paint",
            "description": "Paint",
            "parameters": {
                "type": "object",
                "properties": {"colour": {"type": "string", "description": "c", "enum": colours}},
            },
        },
    }
    many = [
        {
            "type": "function",
            "function": {
                "name": f"f{i}",
                "description": "d",
                "parameters": {
                    "type": "object",
                    "properties": {f"p{j}": {"type": "string", "description": "d"} for j in range(8)},
                },
            },
        }
        for i in range(6)
    ]
    for tools in ([WEATHER_TOOL], [enum_heavy], many, [WEATHER_TOOL, enum_heavy, *many]):
        ours = prompt_tokens(chat(WEATHER_MESSAGES, tools=tools), "chat", O200K)
        assert ours >= cookbook_count(WEATHER_MESSAGES, tools), tools


def test_tool_calls_results_and_schemas_are_counted():
    history = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_current_weather", "arguments": '{"location": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees and sunny"},
    ]
    base = prompt_tokens(chat(history[:1]), "chat", O200K)
    full = prompt_tokens(chat(history), "chat", O200K)
    pieces = [
        "assistant",
        "call_1",
        "get_current_weather",
        '{"location": "Paris"}',
        "tool",
        "call_1",
        "18 degrees and sunny",
    ]
    assert full == base + 2 * 3 + 2 * O200K.per_tool_call + sum(count_o200k(p) for p in pieces)
    schema = {"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"}}}
    assert prompt_tokens(chat(history, response_format=schema), "chat", O200K) > full


# -- images --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "detail", "tokens"),
    [
        ((1024, 1024), "high", 765),  # OpenAI's worked examples
        ((2048, 4096), "high", 1105),
        ((4096, 8192), "low", 85),
        ((512, 512), "auto", 255),
        ((100, 100), None, 255),
        (None, "high", OPENAI_IMAGE_MAX),
        (None, "low", 85),
    ],
)
def test_openai_s_tile_rule(size, detail, tokens):
    assert openai_image(size, detail) == tokens


def test_no_image_costs_more_than_openai_s_maximum():
    for width in (1, 300, 512, 767, 768, 1000, 1536, 2048, 4000):
        for height in (1, 700, 768, 2048, 9000):
            assert openai_image((width, height), "high") <= OPENAI_IMAGE_MAX == 1445


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((200, 200), 54),  # Anthropic's worked examples: ~54, ~1334, ~1590
        ((1000, 1000), 1334),
        ((1092, 1092), 1590),
        ((4000, 3000), ANTHROPIC_IMAGE_MAX),
        (None, ANTHROPIC_IMAGE_MAX),
    ],
)
def test_anthropic_s_image_rule(size, tokens):
    assert anthropic_image(size, None) == tokens


def test_images_are_counted_from_their_headers_in_every_protocol():
    png = images.png(1024, 1024)
    url = images.data_url(png, "image/png")
    base = prompt_tokens(chat([{"role": "user", "content": [{"type": "text", "text": "what is this"}]}]), "chat", O200K)
    with_png = chat(
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": {"url": url}}],
            }
        ]
    )
    assert prompt_tokens(with_png, "chat", O200K) == base + 765
    low = chat(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this"},
                    {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
                ],
            }
        ]
    )
    assert prompt_tokens(low, "chat", O200K) == base + 85
    remote = chat(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this"},
                    {"type": "image_url", "image_url": {"url": "https://x.test/a.jpg"}},
                ],
            }
        ]
    )
    assert prompt_tokens(remote, "chat", O200K) == base + OPENAI_IMAGE_MAX

    jpeg = images.jpeg(1000, 1000)
    block = {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/jpeg",
            "data": images.data_url(jpeg, "image/jpeg").split(",", 1)[1],
        },
    }
    text_only = {"messages": [{"role": "user", "content": [{"type": "text", "text": "what is this"}]}]}
    with_jpeg = {"messages": [{"role": "user", "content": [{"type": "text", "text": "what is this"}, block]}]}
    assert prompt_tokens(with_jpeg, "messages", ANTHROPIC) == prompt_tokens(text_only, "messages", ANTHROPIC) + 1334

    webp = images.data_url(images.webp_vp8x(512, 512), "image/webp")
    items = {
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "what is this"},
                    {"type": "input_image", "image_url": webp, "detail": "auto"},
                ],
            }
        ]
    }
    plain = {"input": [{"role": "user", "content": [{"type": "input_text", "text": "what is this"}]}]}
    assert prompt_tokens(items, "responses", O200K) == prompt_tokens(plain, "responses", O200K) + 255


# -- the three protocols -------------------------------------------------------------------------


def test_the_same_conversation_counts_the_same_text_in_every_protocol():
    system, question, answer = "Be brief.", "人工智能 and tokens 🎉?", "They are pieces of text."
    chat_body = chat(
        [
            {"role": "system", "content": system},
            {"role": "user", "content": question},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "More."},
        ]
    )
    responses_body = {
        "instructions": system,
        "input": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": [{"type": "output_text", "text": answer}]},
            {"role": "user", "content": [{"type": "input_text", "text": "More."}]},
        ],
    }
    messages_body = {
        "system": [{"type": "text", "text": system}],
        "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": [{"type": "text", "text": "More."}]},
        ],
    }
    for rules in (O200K, ANTHROPIC, BYTES):
        counts = {
            prompt_tokens(chat_body, "chat", rules),
            prompt_tokens(responses_body, "responses", rules),
            prompt_tokens(messages_body, "messages", rules),
        }
        assert len(counts) == 1, (rules.name, counts)


def test_messages_blocks_tools_results_and_thinking_are_counted():
    tools = [
        {
            "name": "lookup",
            "description": "Look it up",
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
        }
    ]
    body = {
        "system": "Be brief.",
        "tools": tools,
        "messages": [
            {"role": "user", "content": "find it"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should call the tool.", "signature": "sig_" + "x" * 400},
                    {"type": "redacted_thinking", "data": "opaque" * 100},
                    {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "it"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "found"}]},
                    {"type": "text", "text": "thanks"},
                ],
            },
        ],
    }
    texts = [
        "system",
        "Be brief.",
        "user",
        "find it",
        "assistant",
        "I should call the tool.",
        "toolu_1",
        "lookup",
        '{"q":"it"}',
        "user",
        "toolu_1",
        "found",
        "thanks",
    ]
    expected = (
        4 * ANTHROPIC.per_message
        + 2 * ANTHROPIC.per_tool_call
        + ANTHROPIC.per_request
        + ANTHROPIC.tools_preamble
        + ANTHROPIC.per_tool
        + sum(anthropic_text(t) for t in texts)
        + anthropic_text(
            '{"name":"lookup","description":"Look it up","input_schema":{"type":"object",'
            '"properties":{"q":{"type":"string"}}}}'
        )
    )
    assert prompt_tokens(body, "messages", ANTHROPIC) == expected


def test_unfamiliar_parts_are_counted_by_their_strings_but_not_their_payloads():
    audio = chat(
        [
            {
                "role": "user",
                "content": [{"type": "input_audio", "input_audio": {"data": "UklGR" * 1000, "format": "wav"}}],
            }
        ]
    )
    assert prompt_tokens(audio, "chat", O200K) < 30
    document = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "word " * 100}}
                ],
            }
        ]
    }
    assert prompt_tokens(document, "messages", O200K) > 100


def test_rules_by_setting_or_by_wire():
    assert rules_for(None, "chat") is O200K
    assert rules_for(None, "messages") is ANTHROPIC
    assert rules_for("bytes", "messages") is BYTES
