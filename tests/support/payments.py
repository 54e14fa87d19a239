"""A gateway that takes payments through the fake Stripe: its `[payments]` table, its environment,
and Stripe's webhooks pointed at it (a fixture yields from :func:`paying_gateway`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tests.support.fake_stripe import API_KEY, WEBHOOK_SECRET, FakeStripe
from tests.support.gateway import Gateway, verified_gateway, write_config

#: The environment a paying gateway needs: Stripe's key and the webhook endpoint's secret.
STRIPE_ENV = {"STRIPE_SECRET_KEY": API_KEY, "STRIPE_WEBHOOK_SECRET": WEBHOOK_SECRET}


def paying_gateway(
    directory: Path, upstream_base_url: str, stripe: FakeStripe, table: str = "", *, redis: bool = False
) -> Iterator[Gateway]:
    """A verified gateway whose `[payments]` talks to ``stripe`` (``table``: more lines of the table),
    Stripe's webhooks delivered to it; ``redis``: its rate limits in Redis, so that more gateway
    processes may serve the same ledger."""
    config = write_config(directory, upstream_base_url, redis=redis)
    config.write_text(config.read_text() + f'\n[payments]\napi_base = "{stripe.base_url}"\n{table}\n')
    for gateway in verified_gateway(config, STRIPE_ENV):
        stripe.webhooks.url = f"{gateway.root_url}/webhooks/stripe"
        yield gateway
