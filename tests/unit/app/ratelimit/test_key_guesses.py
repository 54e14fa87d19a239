"""Failed key attempts per client address: what an address is, and a budget that holds when the
shared store does not answer (the end-to-end test shows the 429s through a gateway)."""

from __future__ import annotations

from typing import Any

import pytest

from app.errors import RateLimited
from app.ratelimit.key_guesses import KeyGuesses, address_of
from app.ratelimit.memory import MemoryLimiter


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),  # one client holds a whole /64: its addresses are one
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("::ffff:198.51.100.9", "198.51.100.9"),
        (None, "unknown"),
    ],
)
def test_an_address_is_an_ipv4_address_or_an_ipv6_64(host: str | None, address: str):
    assert address_of(host) == address


class Down:
    shared = True

    async def admit(self, limits: Any) -> Any:
        raise ConnectionError("Redis is down")


@pytest.mark.parametrize("store", [MemoryLimiter(), Down()], ids=["memory", "shared-store-down"])
async def test_an_address_over_its_budget_is_refused_before_any_look_up_and_others_are_not(store: Any):
    guesses = KeyGuesses(store, per_minute=3)
    for _ in range(3):
        guesses.check("203.0.113.7")
        await guesses.failed("203.0.113.7")
    with pytest.raises(RateLimited) as over:
        await guesses.failed("203.0.113.7")
    assert over.value.headers["retry-after"] == "20"  # a minute's budget of 3: one more every 20 s
    assert not over.value.retryable
    with pytest.raises(RateLimited):
        guesses.check("203.0.113.7")
    guesses.check("198.51.100.9")


async def test_no_budget_means_no_limit():
    guesses = KeyGuesses(MemoryLimiter(), per_minute=0)
    for _ in range(100):
        await guesses.failed("203.0.113.7")
    guesses.check("203.0.113.7")
