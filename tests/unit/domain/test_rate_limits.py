"""The token-bucket arithmetic shared by the in-memory and the Redis limiter."""

from __future__ import annotations

import math

from domain.rate_limits import REQUESTS, TOKENS, Limit, decide, refilled


def test_a_bucket_refills_at_its_limit_per_minute_and_never_beyond_it():
    rpm = Limit("key:k", REQUESTS, 60, 1)
    assert refilled(0.0, 100.0, 101.0, rpm) == 1.0  # 60 per minute: one per second
    assert refilled(10.0, 100.0, 10_000.0, rpm) == 60.0
    assert refilled(-5.0, 100.0, 102.0, rpm) == -3.0  # a corrected overdraft is paid back by time


def test_admission_takes_from_every_bucket_or_from_none():
    limits = [Limit("key:k", REQUESTS, 10, 1), Limit("team:t", TOKENS, 1000, 400)]
    admitted = decide([10.0, 1000.0], limits)
    assert admitted.admitted
    assert [level.remaining for level in admitted.levels] == [9.0, 600.0]

    refused = decide([9.0, 300.0], limits)  # requests would fit, tokens do not
    assert not refused.admitted
    assert [level.remaining for level in refused.levels] == [9.0, 300.0]  # nothing taken
    assert math.isclose(refused.retry_after, 100 / (1000 / 60))  # 100 tokens short at 1000/min


def test_a_request_above_the_limit_itself_can_never_be_admitted():
    refused = decide([100.0], [Limit("key:k", TOKENS, 100, 101)])
    assert not refused.admitted
    assert math.isinf(refused.retry_after)


def test_the_binding_limit_is_the_one_with_the_smallest_share_left():
    limits = [Limit("key:k", REQUESTS, 10, 1), Limit("team:t", REQUESTS, 1000, 1)]
    decision = decide([3.0, 500.0], limits)
    level = decision.binding(REQUESTS)
    assert level is not None
    assert level.limit.scope == "key:k"
    assert level.remaining == 2.0
    assert math.isclose(level.reset_seconds, 8 / (10 / 60))
    assert decision.binding(TOKENS) is None
