"""An image request on the billed path: held for its ``n`` images at the dearest price it allows,
sent to the model's upstream, charged for what came back, answered with its cost.

It goes through the same :class:`~app.http.billed_call.BilledCall` as a chat request (rate limits,
budgets, Idempotency-Key, one settlement whatever happens); only its sizing and its bill differ
(``domain/image_pricing.py``). The answer is large — base64 images — so it is never decoded: its
top-level members are relayed as the upstream wrote them, the ``data`` array only counted, and
``usage`` (the upstream's, or one made here when it sent none, as dall-e-3 does) gains ``cost`` and
``remaining`` as chat's does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from litestar import Request, Response

from app.errors import InsufficientCreditsError, InvalidRequest, UpstreamFailure
from app.http.attribution import attribution_of
from app.http.billed_call import BilledCall, hold
from app.http.billed_request import BilledRequest, HoldSize, OutputAsk, idempotency_of, request_id_of
from app.json import encode, object_or
from app.keys import Principal
from app.observability.record import current_record
from app.runtime import BillingServices
from app.translate.exchange import Exchange
from app.upstream import Answer
from domain import image_pricing
from domain.image_pricing import ImageAnswer, ImageAsk, ImageOptionError
from domain.pricing import TokenUsage
from domain.settings import Model

_count_items = msgspec.json.Decoder(list[msgspec.Raw]).decode


@dataclass(frozen=True, slots=True)
class ImageRequest:
    """An image request its endpoint has parsed and authorised."""

    principal: Principal
    model: Model
    #: The ledger's name of the endpoint (``images.generations``), and the upstream API's path.
    endpoint: str
    path: str
    body: dict[str, Any]
    raw_body: bytes
    ask: ImageAsk


async def serve_images(
    services: BillingServices, request: Request[Any, Any, Any], asked: ImageRequest
) -> Response[bytes]:
    """Hold, call, charge, answer. A size or quality the model does not offer was refused by the
    endpoint; a team that cannot afford the dearest the request allows is refused (402, saying how
    many images it affords) before the upstream is called."""
    billing, model, ask = services.billing, asked.model, asked.ask
    price = billing.price_now(model)
    try:
        kinds = image_pricing.kinds_asked(price, model.image_defaults, ask)
    except ImageOptionError as exc:
        raise InvalidRequest(exc.message, param=exc.param) from None
    adjustment = asked.principal.adjustment_for(model.id)

    def worst_case(n: int) -> int:
        return image_pricing.worst_case_in_micros(price, kinds, _with_n(ask, n), billing.credits_per_usd, adjustment)

    record = current_record()
    billed = BilledRequest(
        principal=asked.principal,
        model=model,
        protocol="chat",  # OpenAI's error shape
        upstream_wire=services.upstreams[model.id].wire,
        endpoint=asked.endpoint,
        stream=False,
        request_id=request_id_of(record),
        idempotency=idempotency_of(request, asked.raw_body),
        attribution=attribution_of(request, "chat", asked.body),
        prompt_tokens=ask.prompt_bytes,
        output=OutputAsk(most=0, requested=0),
        record=record,
    )
    exchange = _exchange(asked.body)
    size = HoldSize(worst_case=worst_case(ask.n), admitted_tokens=ask.prompt_bytes // 4)
    try:
        call = await hold(services, request, billed, exchange, size)
    except InsufficientCreditsError as short:
        affordable = max((n for n in range(ask.n - 1, 0, -1) if worst_case(n) <= short.available), default=0)
        raise short.affording_images(affordable) from None
    if not isinstance(call, BilledCall):
        return call  # the stored answer of the request served before under this Idempotency-Key
    async with call:
        call.seal()
        answer = await call.complete(asked.path)
        usage = image_pricing.usage_of(price, kinds, _read(answer))
        body = await call.charge(usage, lambda fields: _render(answer, usage, fields))
    return Response(body, headers=call.headers, media_type="application/json")


def _with_n(ask: ImageAsk, n: int) -> ImageAsk:
    return ImageAsk(ask.size, ask.quality, n, ask.prompt_bytes, ask.input_images)


def _exchange(body: dict[str, Any]) -> Exchange:
    """The body goes upstream as the client sent it (the model's name put in by the upstream);
    the upstream's errors reach the client word for word, as OpenAI wrote them."""

    def unused(*_: Any) -> Any:
        raise AssertionError("an image answer is read by app/http/image_call.py")

    return Exchange(body, {}, False, "chat", unused, unused, unused)


def _read(answer: Answer) -> ImageAnswer:
    """What the answer says about its cost, without decoding its images: ``data`` counted as raw
    items, ``size``, ``quality`` and ``usage`` (small) decoded."""
    raw = answer.members.get("data")
    if raw is None or not answer.starts_with("data", b"["):
        raise UpstreamFailure("The upstream provider sent an image answer without data.")
    try:
        images = len(_count_items(raw))
    except msgspec.DecodeError:
        raise UpstreamFailure("The upstream provider sent invalid JSON.") from None
    size, quality = answer.member("size"), answer.member("quality")
    return ImageAnswer(
        images,
        size if isinstance(size, str) else None,
        quality if isinstance(quality, str) else None,
        answer.member("usage"),
    )


def _render(answer: Answer, usage: TokenUsage, fields: dict[str, Any]) -> bytes:
    """The answer as the upstream wrote it, its ``usage`` carrying the charge's ``cost`` and
    ``remaining`` (a usage object made here, saying the images billed, when it sent none)."""
    reported = object_or(answer.member("usage"), None)
    if reported is None:
        reported = {"images": sum(count for _, count in usage.images)}
    return encode({**answer.members, "usage": {**reported, **fields}})
