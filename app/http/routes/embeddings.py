"""POST /v1/embeddings: OpenAI's embeddings, held and charged per input token.

The body goes upstream as the client wrote it (only ``model`` becomes the deployment's name):
``input`` as a string, an array of strings, a token array or an array of token arrays,
``dimensions`` and ``encoding_format`` (``float`` or ``base64``) untouched. Before the hold the
inputs are counted with the model's tokenizer (``app/tokens``), each checked against the model's
``context_window``; the hold is that count at the model's input price. The charge is the upstream's
``usage.prompt_tokens`` (the gateway's count when it reports none), and the answer is the upstream's
with ``usage.cost`` and ``usage.remaining`` added — its ``data`` (the vectors: 1,536 floats per input,
megabytes for a batch) is never decoded: the answer is read into its top-level members and written
back from them (``app/upstream/base.Answer``), so the vectors' bytes are copied, not parsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import anyio
import msgspec
from litestar import Request, Response, post

from app.errors import InvalidRequest, UpstreamFailure
from app.http.billed_request import Direct
from app.http.direct import Affordable, DirectAsk, serve_direct
from app.http.prompt_size import THREAD_ABOVE_BYTES, model_rules
from app.http.routes.auth import authenticate, authorize
from app.http.routes.request_body import check_positive, read_json_object, require, validate
from app.http.routes.served import served_model
from app.runtime import Runtime
from app.tokens.counting import Rules
from app.translate.answers import render_passed
from app.upstream import Answer
from domain import endpoints
from domain.pricing import Quote
from domain.settings import Model, Settings
from domain.usage import TokenUsage

#: The most inputs one request may carry (OpenAI's own limit).
MAX_INPUTS = 2048


class EmbeddingsRequest(msgspec.Struct):
    """The fields Tollgate itself reads of an embeddings request; every other field passes through
    untouched. ``input``: a string, an array of strings, an array of token ids or an array of
    token-id arrays (at most 2,048 inputs, none empty)."""

    model: str
    input: str | list[Any]
    dimensions: int | None = None
    encoding_format: Literal["float", "base64"] | None = None
    #: The end user the charge is attributed to.
    user: str | None = None


@dataclass(frozen=True, slots=True)
class EmbeddingsInput:
    """A request's inputs as the gateway reads them: each a text or a token array."""

    items: list[str | list[int]]


def read_inputs(value: Any) -> EmbeddingsInput:
    """``input`` in any of its four shapes, or a 400 saying what is wrong."""
    if isinstance(value, str):
        items: list[str | list[int]] = [value]
    elif isinstance(value, list) and value and all(_is_token(t) for t in value):
        items = [value]
    elif isinstance(value, list) and value:
        items = []
        for i, item in enumerate(value):
            if isinstance(item, str) or (isinstance(item, list) and all(_is_token(t) for t in item)):
                items.append(item)
            else:
                raise InvalidRequest(
                    f"Invalid 'input[{i}]': expected a string or an array of token ids.", param=f"input[{i}]"
                )
        if len({isinstance(item, str) for item in items}) > 1:
            raise InvalidRequest("'input' must be all strings or all token arrays, not both.", param="input")
    else:
        raise InvalidRequest(
            "'input' must be a non-empty string, array of strings, array of tokens or array of token arrays.",
            param="input",
        )
    if len(items) > MAX_INPUTS:
        raise InvalidRequest(
            f"'input' holds {len(items)} inputs; at most {MAX_INPUTS} may be embedded in one request.", param="input"
        )
    for i, item in enumerate(items):
        if not item:
            raise InvalidRequest(f"Invalid 'input[{i}]': an input must not be empty.", param="input")
    return EmbeddingsInput(items)


def _is_token(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**32


def parse_embeddings_request(raw: bytes, settings: Settings) -> tuple[dict[str, Any], EmbeddingsRequest]:
    """The body, its fields' types checked (``dimensions`` at least 1), or a 400 in OpenAI's shape."""
    body = read_json_object(raw, settings.max_json_depth)
    require(body, "model", "input")
    request = validate(body, EmbeddingsRequest)
    check_positive(request.dimensions, "dimensions")
    return body, request


def count_inputs(inputs: EmbeddingsInput, rules: Rules, context_window: int) -> int:
    """The inputs' tokens by the model's rules (a token array is its own length); 400 for an input
    longer than the model takes."""
    total = 0
    for i, item in enumerate(inputs.items):
        tokens = len(item) if isinstance(item, list) else rules.text(item)
        if tokens > context_window:
            raise InvalidRequest(
                f"This model's maximum context length is {context_window} tokens, however input[{i}] "
                f"has {tokens} tokens. Please reduce the length of the input.",
                param="input",
                code="context_length_exceeded",
            )
        total += tokens
    return total


@dataclass(frozen=True, slots=True)
class Embedding:
    """One embeddings request on the billed path (``app/http/direct.py``)."""

    model: Model
    #: The inputs' tokens by the gateway's count: the hold, and the charge when the upstream says none.
    counted: int

    def worst_case(self, quote: Quote) -> int:
        return quote.worst_case(self.counted)

    def affordable(self, quote: Quote, available: int) -> Affordable:
        return Affordable("input_tokens", quote.affordable_prompt(available, self.counted), "input tokens")

    def usage(self, answer: Answer) -> TokenUsage:
        if not answer.starts_with("data", b"["):
            raise UpstreamFailure("The upstream provider sent an embeddings answer without data.")
        usage = answer.member("usage")
        reported = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if isinstance(reported, int) and not isinstance(reported, bool) and reported >= 0:
            return TokenUsage(input_tokens=reported)
        return TokenUsage(input_tokens=self.counted)  # the upstream did not say: bill what was counted here

    def render(self, answer: Answer, fields: dict[str, Any]) -> bytes:
        tokens = self.usage(answer).input_tokens
        return render_passed(answer, self.model.id, {"prompt_tokens": tokens, "total_tokens": tokens}, fields)


@post("/v1/embeddings", status_code=200)
async def create_embeddings(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    raw = await request.body()
    body, parsed = parse_embeddings_request(raw, runtime.settings)
    inputs = read_inputs(parsed.input)
    model = served_model(runtime.settings, parsed.model, endpoints.EMBEDDINGS)
    authorize(principal, model.id, endpoints.EMBEDDINGS)
    rules = model_rules(model, runtime.upstreams[model.id].wire)
    if len(raw) > THREAD_ABOVE_BYTES:  # a large batch is counted off the event loop
        counted = await anyio.to_thread.run_sync(count_inputs, inputs, rules, model.context_window)
    else:
        counted = count_inputs(inputs, rules, model.context_window)
    ask = DirectAsk(
        principal=principal,
        model=model,
        endpoint=endpoints.EMBEDDINGS,
        body=body,
        raw_body=raw,
        direct=Direct("/embeddings", body),
        admitted_tokens=counted,
    )
    return await serve_direct(runtime, request, ask, Embedding(model, counted))
