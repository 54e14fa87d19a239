"""The objects the fake Stripe answers with, in Stripe's shape for the API version it speaks.

Each builder returns every top-level field Stripe returns by default for that object (the fields the
official library declares on its resource class, ``stripe/_customer.py`` and the others, less the
*includable* ones Stripe sends only when asked with ``expand[]``: a Customer's ``sources``, ``tax``,
``tax_ids``, ``subscriptions``, ``cash_balance``, ``invoice_credit_balance``; a Checkout Session's
``line_items``; a Charge's ``refunds``), nullable ones as ``null``, and leaves out the ones that exist
only in other situations (Connect's ``account``, a Charge's ``level3``, a failed Refund's
``failure_reason``); charges, refunds and disputes are built in ``fake_stripe_money.py``.
``tests/e2e/test_fake_stripe.py`` holds every field sent, at every depth, to the library's declarations.

Serialised as Stripe does (:func:`encode`): ``id`` and ``object`` first, the rest in alphabetical
order, indented by two spaces. A webhook's signature covers those exact bytes, so a receiver that
re-serialises the JSON before checking it fails here as it would against Stripe.
"""

from __future__ import annotations

import json
import secrets
import string
from typing import Any

#: The API version the fake speaks: the one the installed ``stripe`` library pins (its ``_api_version.py``);
#: the proof test fails when the library moves to another major version, so that these shapes are looked
#: at again. Events carry it; answers carry the version the request asked for (``Stripe-Version``).
API_VERSION = "2026-10-28.endive"
_ALPHABET = string.ascii_letters + string.digits

Obj = dict[str, Any]


def new_id(prefix: str, length: int = 24) -> str:
    """An id in Stripe's form: ``cus_``, ``pi_``, ``evt_`` … then random letters and digits."""
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(length))


def _ordered(value: Any) -> Any:
    if isinstance(value, dict):
        first = [k for k in ("id", "object") if k in value]
        rest = sorted(k for k in value if k not in first)
        return {k: _ordered(value[k]) for k in first + rest}
    if isinstance(value, list):
        return [_ordered(v) for v in value]
    return value


def encode(value: Any) -> bytes:
    """A body as Stripe writes it: ``id`` and ``object`` first, then alphabetical, two-space indent."""
    return json.dumps(_ordered(value), indent=2).encode()


def address() -> Obj:
    return {"city": None, "country": None, "line1": None, "line2": None, "postal_code": None, "state": None}


def customer(
    cid: str, created: int, email: str | None, name: str | None, description: str | None, metadata: Obj
) -> Obj:
    return {
        "id": cid,
        "object": "customer",
        "address": None,
        "balance": 0,
        "business_name": None,
        "created": created,
        "currency": None,
        "customer_account": None,
        "default_source": None,
        "delinquent": False,
        "description": description,
        "discount": None,
        "email": email,
        "individual_name": None,
        "invoice_prefix": new_id("", 8).upper(),
        "invoice_settings": {
            "custom_fields": None,
            "default_payment_method": None,
            "footer": None,
            "rendering_options": None,
        },
        "livemode": False,
        "metadata": metadata,
        "name": name,
        "next_invoice_sequence": 1,
        "phone": None,
        "preferred_locales": [],
        "shipping": None,
        "tax_exempt": "none",
        "test_clock": None,
    }


def checkout_session(sid: str, created: int, fields: Obj) -> Obj:
    """An open Checkout Session in payment mode; ``fields`` sets what the request chose."""
    return {
        "id": sid,
        "object": "checkout.session",
        "adaptive_pricing": {"enabled": False},
        "after_expiration": None,
        "allow_promotion_codes": None,
        "amount_subtotal": None,
        "amount_total": None,
        "automatic_tax": {"enabled": False, "liability": None, "provider": None, "status": None},
        "billing_address_collection": None,
        "cancel_url": None,
        "client_reference_id": None,
        "client_secret": None,
        "collected_information": None,
        "consent": None,
        "consent_collection": None,
        "created": created,
        "currency": None,
        "currency_conversion": None,
        "custom_fields": [],
        "custom_text": {
            "after_submit": None,
            "shipping_address": None,
            "submit": None,
            "terms_of_service_acceptance": None,
        },
        "customer": None,
        "customer_account": None,
        "customer_creation": None,
        "customer_details": None,
        "customer_email": None,
        "discounts": [],
        "expires_at": created + 24 * 3600,
        "integration_identifier": None,
        "invoice": None,
        "invoice_creation": None,
        "livemode": False,
        "locale": None,
        "metadata": {},
        "mode": "payment",
        "origin_context": None,
        "payment_intent": None,
        "payment_link": None,
        "payment_method_collection": "if_required",
        "payment_method_configuration_details": None,
        "payment_method_options": {},
        "payment_method_types": ["card"],
        "payment_status": "unpaid",
        "phone_number_collection": {"enabled": False},
        "recovered_from": None,
        "saved_payment_method_options": None,
        "setup_intent": None,
        "shipping_address_collection": None,
        "shipping_cost": None,
        "shipping_options": [],
        "status": "open",
        "submit_type": None,
        "subscription": None,
        "success_url": None,
        "total_details": {"amount_discount": 0, "amount_shipping": 0, "amount_tax": 0},
        "ui_mode": "hosted_page",
        "url": None,
        "wallet_options": None,
        **fields,
    }


def customer_details(email: str | None) -> Obj:
    """What the customer typed on the payment page."""
    return {
        "address": {**address(), "country": "US", "postal_code": "94107"},
        "business_name": None,
        "email": email or "jenny.rosen@example.com",
        "individual_name": None,
        "name": "Jenny Rosen",
        "phone": None,
        "tax_exempt": "none",
        "tax_ids": [],
    }


def payment_method(pmid: str, created: int, customer_id: str | None) -> Obj:
    """A test Visa card (4242), as ``pm_card_visa`` makes one."""
    return {
        "id": pmid,
        "object": "payment_method",
        "allow_redisplay": "unspecified",
        "billing_details": {"address": address(), "email": None, "name": None, "phone": None, "tax_id": None},
        "card": {
            "brand": "visa",
            "checks": {"address_line1_check": None, "address_postal_code_check": None, "cvc_check": "pass"},
            "country": "US",
            "display_brand": "visa",
            "exp_month": 12,
            "exp_year": 2034,
            "fingerprint": "Xt5EWLLDS7FJjR1c",
            "funding": "credit",
            "generated_from": None,
            "last4": "4242",
            "networks": {"available": ["visa"], "preferred": None},
            "regulated_status": "unregulated",
            "three_d_secure_usage": {"supported": True},
            "wallet": None,
        },
        "created": created,
        "customer": customer_id,
        "livemode": False,
        "metadata": {},
        "type": "card",
    }


def payment_intent(piid: str, created: int, fields: Obj) -> Obj:
    return {
        "id": piid,
        "object": "payment_intent",
        "amount": 0,
        "amount_capturable": 0,
        "amount_details": {"tip": {}},
        "amount_received": 0,
        "application": None,
        "application_fee_amount": None,
        "automatic_payment_methods": None,
        "canceled_at": None,
        "cancellation_reason": None,
        "capture_method": "automatic_async",
        "client_secret": f"{piid}_secret_{new_id('', 25)}",
        "confirmation_method": "automatic",
        "created": created,
        "currency": "usd",
        "customer": None,
        "customer_account": None,
        "description": None,
        "excluded_payment_method_types": None,
        "last_payment_error": None,
        "latest_charge": None,
        "livemode": False,
        "metadata": {},
        "next_action": None,
        "on_behalf_of": None,
        "payment_method": None,
        "payment_method_configuration_details": None,
        "payment_method_options": {},
        "payment_method_types": ["card"],
        "processing": None,
        "receipt_email": None,
        "review": None,
        "setup_future_usage": None,
        "shipping": None,
        "source": None,
        "statement_descriptor": None,
        "statement_descriptor_suffix": None,
        "status": "requires_payment_method",
        "transfer_data": None,
        "transfer_group": None,
        **fields,
    }


def event(evid: str, created: int, kind: str, data: Obj, request: tuple[str | None, str | None]) -> Obj:
    """An event: ``data`` holds the object as it was then (and ``previous_attributes`` on updates);
    ``request`` names the API request that caused it (None, None: not a request, e.g. a customer paying)."""
    return {
        "id": evid,
        "object": "event",
        "api_version": API_VERSION,
        "created": created,
        "data": data,
        "livemode": False,
        "pending_webhooks": 0,
        "request": {"id": request[0], "idempotency_key": request[1]},
        "type": kind,
    }


def page(items: list[Obj], has_more: bool, url: str) -> Obj:
    return {"object": "list", "data": items, "has_more": has_more, "url": url}
