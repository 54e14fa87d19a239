"""The fake Stripe's API routes: each reads its parameters as Stripe does and changes the account.

A route takes the request's decoded parameters (``stripe_form.decode``) and answers an object (or
raises ``StripeError`` / ``FormError``). Unknown parameters, missing ones and ones of the wrong type
are refused with Stripe's ``invalid_request_error`` (``parameter_unknown``, ``parameter_missing``,
``parameter_invalid_integer``), so a client that sends what Stripe would refuse fails here too.
``expand[]`` replaces an id with its object, on retrieves and, with ``data.``, on lists.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from fnmatch import fnmatchcase
from typing import Any

from tests.support import fake_stripe_objects as shapes
from tests.support.fake_stripe_account import NAMES, Account, invalid
from tests.support.fake_stripe_objects import Obj
from tests.support.stripe_form import FormError, Params

Route = Callable[[Account, dict[str, Any], dict[str, str]], Obj]
_LIST = {"limit", "starting_after", "ending_before", "created", "expand"}
_CURRENCY = re.compile(r"[a-z]{3}")


def _url(value: str | None, param: str) -> None:
    if value is not None and not re.match(r"https?://[^/\s]+", value):
        raise FormError("Not a valid URL", param=param)


def _currency(value: str | None, param: str) -> str:
    if value is None or not _CURRENCY.fullmatch(value):
        raise FormError(
            f"Invalid currency: {value}. Stripe currently supports these currencies: usd, eur, gbp, …", param=param
        )
    return value


def create_customer(account: Account, values: dict[str, Any], _: dict[str, str]) -> Obj:
    p = Params(values, {"email", "name", "description", "metadata", "phone", "expand"})
    return account.create_customer(p.text("email"), p.text("name"), p.text("description"), p.metadata())


def _line_total(item: Params) -> tuple[int, str]:
    """What one ``line_items[i]`` costs, and in which currency (``price_data`` only: the fake has no Prices)."""
    price = item.text("price")
    if price is not None:
        raise invalid(f"No such price: '{price}'", item.name("price"), "resource_missing")
    data = item.mapping(
        "price_data", {"currency", "unit_amount", "unit_amount_decimal", "product", "product_data", "tax_behavior"}
    )
    if data is None:
        raise FormError(
            f"Missing required param: {item.name('price_data')}.",
            param=item.name("price_data"),
            code="parameter_missing",
        )
    currency = _currency(data.text("currency", required=True), data.name("currency"))
    product = data.mapping("product_data", {"name", "description", "images", "metadata", "tax_code", "unit_label"})
    if product is None and "product" not in data:
        raise FormError(
            f"Missing required param: {data.name('product_data')}.",
            param=data.name("product_data"),
            code="parameter_missing",
        )
    if product is not None:
        product.text("name", required=True)
    unit = data.integer("unit_amount", required="unit_amount_decimal" not in data)
    quantity = item.integer("quantity", required=True)
    if unit is None or quantity is None or unit < 0 or quantity < 1:
        raise FormError(
            "Invalid line item: unit_amount must be at least 0 and quantity at least 1", param=item.name("quantity")
        )
    return unit * quantity, currency


def create_session(account: Account, values: dict[str, Any], _: dict[str, str]) -> Obj:
    known = {
        "mode", "line_items", "customer", "customer_email", "client_reference_id", "metadata", "success_url",
        "cancel_url", "payment_intent_data", "payment_method_types", "expires_at", "customer_creation", "locale",
        "submit_type", "ui_mode", "allow_promotion_codes", "billing_address_collection", "expand",
    }  # fmt: skip
    p = Params(values, known)
    if p.text("mode", required=True, choices=("payment", "setup", "subscription")) != "payment":
        raise FormError("The fake Stripe serves Checkout Sessions in mode=payment only", param="mode")
    items = p.items("line_items", {"price", "price_data", "quantity", "adjustable_quantity", "tax_rates"})
    if not items:
        raise FormError("Missing required param: line_items.", param="line_items", code="parameter_missing")
    totals = [_line_total(item) for item in items]
    currencies = {c for _, c in totals}
    if len(currencies) > 1:
        raise FormError("All line items must use the same currency.", param="line_items")
    currency, total = currencies.pop(), sum(t for t, _ in totals)
    account.check_amount(total, currency, "line_items")
    if "customer" in p and "customer_email" in p:
        raise invalid(
            "You may only specify one of these parameters: customer, customer_email.", None, "parameters_exclusive"
        )
    _url(p.text("success_url"), "success_url")
    _url(p.text("cancel_url"), "cancel_url")
    data = p.mapping(
        "payment_intent_data",
        {"metadata", "description", "setup_future_usage", "statement_descriptor", "statement_descriptor_suffix",
         "receipt_email", "capture_method"},
    )  # fmt: skip
    intent: Obj = {}
    if data is not None:
        intent = {
            "metadata": data.metadata(),
            "description": data.text("description"),
            "setup_future_usage": data.text("setup_future_usage", choices=("off_session", "on_session")),
        }
    customer = p.text("customer")
    fields: Obj = {
        "amount_subtotal": total,
        "amount_total": total,
        "currency": currency,
        "customer": customer,
        "customer_email": p.text("customer_email"),
        "customer_creation": None if customer else p.text("customer_creation") or "if_required",
        "client_reference_id": p.text("client_reference_id"),
        "metadata": p.metadata(),
        "success_url": p.text("success_url"),
        "cancel_url": p.text("cancel_url"),
        "locale": p.text("locale"),
        "submit_type": p.text("submit_type"),
    }
    if p.integer("expires_at") is not None:
        fields["expires_at"] = p.integer("expires_at")
    if p.strings("payment_method_types"):
        fields["payment_method_types"] = p.strings("payment_method_types")
    return account.create_session(fields, intent)


def create_payment_intent(account: Account, values: dict[str, Any], _: dict[str, str]) -> Obj:
    known = {
        "amount", "currency", "customer", "payment_method", "off_session", "confirm", "metadata", "description",
        "payment_method_types", "setup_future_usage", "receipt_email", "statement_descriptor",
        "statement_descriptor_suffix", "capture_method", "error_on_requires_action", "automatic_payment_methods",
        "return_url", "expand",
    }  # fmt: skip
    p = Params(values, known)
    amount = p.integer("amount", required=True)
    currency = _currency(p.text("currency", required=True), "currency")
    assert amount is not None
    account.check_amount(amount, currency)
    off = p.text("off_session")
    off_session = off in ("true", "one_off", "recurring")
    if off not in (None, "true", "false", "one_off", "recurring"):
        raise FormError(f"Invalid off_session: {off}", param="off_session")
    confirm = p.boolean("confirm")
    if off_session and not confirm:
        raise invalid("off_session can only be used when confirm=true.", "off_session")
    types = p.strings("payment_method_types")
    fields: Obj = {
        "amount": amount,
        "currency": currency,
        "customer": p.text("customer"),
        "payment_method": p.text("payment_method"),
        "metadata": p.metadata(),
        "description": p.text("description"),
        "receipt_email": p.text("receipt_email"),
        "setup_future_usage": p.text("setup_future_usage", choices=("off_session", "on_session")),
        "payment_method_types": types or ["card"],
        "automatic_payment_methods": None if types else {"allow_redirects": "always", "enabled": True},
    }
    return account.create_payment_intent(fields, confirm=confirm, off_session=off_session)


def create_refund(account: Account, values: dict[str, Any], _: dict[str, str]) -> Obj:
    known = {"charge", "payment_intent", "amount", "reason", "metadata", "expand", "instructions_email",
             "refund_application_fee", "reverse_transfer"}  # fmt: skip
    p = Params(values, known)
    charge, intent = p.text("charge"), p.text("payment_intent")
    if charge is not None and intent is not None:
        raise invalid(
            "You may only specify one of these parameters: charge, payment_intent.", None, "parameters_exclusive"
        )
    if charge is None and intent is None:
        raise FormError("Missing required param: charge.", param="charge", code="parameter_missing")
    reason = p.text("reason", choices=("duplicate", "fraudulent", "requested_by_customer"))
    target, param = (charge, "charge") if charge is not None else (intent or "", "payment_intent")
    return account.refund(target, p.integer("amount"), reason, p.metadata(), param)


def page_of(account: Account, kind: str, keep: Callable[[Obj], bool], query: Params) -> Obj:
    """A page of ``kind``, newest first, as Stripe pages it: ``query`` (a ``Params``) gives ``limit``
    (1–100, default 10), ``created`` (a time, or ``gt``/``gte``/``lt``/``lte``) and one cursor,
    ``starting_after`` (older than it) or ``ending_before`` (newer than it)."""
    with account.lock:
        limit = query.integer("limit")
        limit = 10 if limit is None else limit
        if not 1 <= limit <= 100:
            raise invalid("Invalid limit: must be between 1 and 100", "limit")
        bounds = _created_bounds(query)
        rank = account.order
        found = sorted(
            (o for o in account.objects[kind].values() if keep(o) and all(test(o["created"]) for test in bounds)),
            key=lambda o: (o["created"], rank[o["id"]]),
            reverse=True,
        )
        after, before = query.text("starting_after"), query.text("ending_before")
        if after is not None:
            cursor = account.get(kind, after, "starting_after")
            key = (cursor["created"], rank[after])
            found = [o for o in found if (o["created"], rank[o["id"]]) < key]
            shown, more = found[:limit], len(found) > limit
        elif before is not None:
            cursor = account.get(kind, before, "ending_before")
            key = (cursor["created"], rank[before])
            found = [o for o in found if (o["created"], rank[o["id"]]) > key]
            shown, more = found[-limit:], len(found) > limit
        else:
            shown, more = found[:limit], len(found) > limit
        return shapes.page(copy.deepcopy(shown), more, NAMES[kind][1])


def _created_bounds(query: Params) -> list[Callable[[int], bool]]:
    created = query.values.get("created")
    if created is None:
        return []
    if isinstance(created, str):
        at = query.integer("created")
        return [lambda c: c == at]
    ranges = query.mapping("created", {"gt", "gte", "lt", "lte"})
    tests: list[Callable[[int], bool]] = []
    for op, compare in (
        ("gt", lambda c, v: c > v),
        ("gte", lambda c, v: c >= v),
        ("lt", lambda c, v: c < v),
        ("lte", lambda c, v: c <= v),
    ):
        value = ranges.integer(op)
        if value is not None:
            tests.append(lambda c, v=value, f=compare: f(c, v))
    return tests


def retrieve(kind: str) -> Route:
    def route(account: Account, values: dict[str, Any], path: dict[str, str]) -> Obj:
        Params(values, {"expand"})
        with account.lock:
            return copy.deepcopy(account.get(kind, path["id"]))

    return route


def listing(kind: str, filters: tuple[str, ...]) -> Route:
    """A list route: each of ``filters`` keeps the objects whose field of that name equals it."""

    def route(account: Account, values: dict[str, Any], _: dict[str, str]) -> Obj:
        p = Params(values, _LIST | set(filters))
        wanted = {f: p.text(f) for f in filters if f in p}
        return page_of(account, kind, lambda o: all(o.get(f) == v for f, v in wanted.items()), p)

    return route


def list_events(account: Account, values: dict[str, Any], _: dict[str, str]) -> Obj:
    """``type`` may end in ``*`` (``charge.dispute.*``); ``types[]`` lists several exactly."""
    p = Params(values, _LIST | {"type", "types", "delivery_success"})
    pattern, types = p.text("type"), set(p.strings("types"))
    if pattern is not None and types:
        raise invalid("You may only specify one of these parameters: type, types.", None, "parameters_exclusive")

    def keep(event: Obj) -> bool:
        if pattern is not None:
            return fnmatchcase(event["type"], pattern)
        return not types or event["type"] in types

    return page_of(account, "event", keep, p)


ROUTES: list[tuple[str, re.Pattern[str], Route]] = [
    (method, re.compile(path), route)
    for method, path, route in (
        ("POST", r"/v1/customers", create_customer),
        ("GET", r"/v1/customers", listing("customer", ("email",))),
        ("GET", r"/v1/customers/(?P<id>[^/]+)", retrieve("customer")),
        ("POST", r"/v1/checkout/sessions", create_session),
        ("GET", r"/v1/checkout/sessions", listing("checkout.session", ("customer", "payment_intent", "status"))),
        ("GET", r"/v1/checkout/sessions/(?P<id>[^/]+)", retrieve("checkout.session")),
        ("POST", r"/v1/payment_intents", create_payment_intent),
        ("GET", r"/v1/payment_intents", listing("payment_intent", ("customer",))),
        ("GET", r"/v1/payment_intents/(?P<id>[^/]+)", retrieve("payment_intent")),
        ("GET", r"/v1/charges", listing("charge", ("customer", "payment_intent"))),
        ("GET", r"/v1/charges/(?P<id>[^/]+)", retrieve("charge")),
        ("POST", r"/v1/refunds", create_refund),
        ("GET", r"/v1/refunds", listing("refund", ("charge", "payment_intent"))),
        ("GET", r"/v1/refunds/(?P<id>[^/]+)", retrieve("refund")),
        ("GET", r"/v1/disputes", listing("dispute", ("charge", "payment_intent"))),
        ("GET", r"/v1/disputes/(?P<id>[^/]+)", retrieve("dispute")),
        ("GET", r"/v1/events", list_events),
        ("GET", r"/v1/events/(?P<id>[^/]+)", retrieve("event")),
    )
]


def find_route(method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    for m, pattern, route in ROUTES:
        found = pattern.fullmatch(path)
        if m == method and found:
            return route, found.groupdict()
    return None


def expand(account: Account, obj: Obj, paths: list[str]) -> Obj:
    """``obj`` with each id that ``paths`` names (``payment_intent``, ``payment_intent.latest_charge``,
    ``data.customer`` on a list) replaced by its object, as ``expand[]`` asks."""
    for path in paths:
        _expand_one(account, obj, path.split("."))
    return obj


def _expand_one(account: Account, node: Any, parts: list[str]) -> None:
    if not parts or not isinstance(node, dict):
        return
    head, rest = parts[0], parts[1:]
    if head == "data" and isinstance(node.get("data"), list):
        for item in node["data"]:
            _expand_one(account, item, rest)
        return
    value = node.get(head)
    if isinstance(value, str):
        with account.lock:
            found = next((kind[value] for kind in account.objects.values() if value in kind), None)
        if found is None:
            return
        value = node[head] = copy.deepcopy(found)
    _expand_one(account, value, rest)
