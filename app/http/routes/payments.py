"""POST /v1/credits/checkout and POST /webhooks/stripe: credit a team buys itself, through Stripe.

A team's key starts a top-up: a Stripe Checkout Session for an amount within the configured bounds,
whose URL the payer is sent to (the dashboard's "Buy credits" does the same). Nothing is credited
then: the credit comes with Stripe's webhook once the payment succeeded, checked against the webhook
secret by Stripe's own library, and counted once however often Stripe delivers it
(``app/payments/webhook.py``). Errors come in the chat error shape; a webhook Stripe did not sign is
400 and changes nothing.
"""

from __future__ import annotations

import json
import logging
from decimal import Decimal, InvalidOperation
from typing import Any

import msgspec
import stripe
from litestar import Request, Response, post

from app.errors import InvalidRequest, NotFound
from app.http.routes.admin_common import json_response
from app.http.routes.answers import DataAnswer, answers
from app.http.routes.auth import authenticate
from app.http.routes.request_body import read_json_object
from app.payments.stripe_account import Checkout, StripeAccount
from app.payments.webhook import apply_event
from app.runtime import Runtime
from domain.money import credits_from_micros

log = logging.getLogger("tollgate.payments")
#: The most a webhook delivery may be (Stripe's events are a few kilobytes).
MAX_EVENT_BYTES = 1 << 20


def _stripe(runtime: Runtime) -> StripeAccount:
    if runtime.stripe is None:
        raise NotFound("This gateway takes no payments: credit is added by its operator.")
    return runtime.stripe


@post(
    "/v1/credits/checkout",
    status_code=200,
    responses=answers(DataAnswer, "a Stripe Checkout Session for the team's top-up: its url, amount and credits"),
)
async def create_checkout(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    _stripe(runtime)
    body = read_json_object(await request.body(), runtime.settings.max_json_depth)
    checkout = await checkout_for(runtime, principal.team_name, body.get("amount"))
    return json_response(
        {
            "data": {
                "id": checkout.session_id,
                "url": checkout.url,
                "amount": str(checkout.amount),
                "currency": checkout.currency,
                "credits": credits_from_micros(checkout.micros),
                "team": principal.team_name,
            }
        }
    )


async def checkout_for(runtime: Runtime, team: str, asked: object) -> Checkout:
    """A Checkout Session for ``team``'s top-up of ``asked`` (units of the currency), within the bounds."""
    account = _stripe(runtime)
    if isinstance(asked, bool) or not isinstance(asked, str | int | float):
        raise InvalidRequest('Send {"amount": ...}: the amount to pay, e.g. "25.00".', param="amount")
    try:
        amount = Decimal(str(asked))
    except InvalidOperation:
        raise InvalidRequest('The amount to pay must be a number, e.g. "25.00".', param="amount") from None
    bounds = account.payments
    if not amount.is_finite() or not bounds.min_amount <= amount <= bounds.max_amount:
        raise InvalidRequest(
            f"A top-up is from {bounds.min_amount} to {bounds.max_amount} {bounds.currency}.", param="amount"
        )
    try:
        return await account.checkout(team, amount)
    except ValueError as exc:
        raise InvalidRequest(str(exc), param="amount") from None


@post("/webhooks/stripe", status_code=200, include_in_schema=False)
async def stripe_webhook(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    account = _stripe(runtime)
    payload = await request.body()
    signature = request.headers.get("stripe-signature", "")
    if len(payload) > MAX_EVENT_BYTES:
        return _refused("The event is larger than any Stripe sends.")
    try:
        event = account.verified_event(payload, signature)
    except (stripe.SignatureVerificationError, ValueError, json.JSONDecodeError):
        return _refused("The Stripe-Signature header does not match the body and the webhook secret.")
    result = await apply_event(runtime.ledger, account, event)
    log.info("Stripe event %s (%s): %s", event.get("id"), event.get("type"), result)
    return json_response({"received": True, "result": result})


def _refused(message: str) -> Response[bytes]:
    return Response(
        msgspec.json.encode({"error": {"message": message, "type": "invalid_request_error"}}),
        status_code=400,
        media_type="application/json",
    )
