"""A query's bounds, said once: the admin and dashboard APIs name the query parameter, the CLI its
option, in the same words (``app/paging.py``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app.cli.support import out_of_bounds
from app.paging import OutOfBounds, check_limit, check_page, check_since


@pytest.mark.parametrize(
    ("check", "values", "parameter", "option", "words"),
    [
        (check_page, (0, 20, 1000), "page", "--page", "expected a whole number from 1 to 1000000, got 0."),
        (check_page, (10**30, 20, 1000), "page", "--page", f"expected a whole number from 1 to 1000000, got {10**30}."),
        (check_page, (1, 1001, 1000), "per_page", "--per-page", "expected a whole number from 1 to 1000, got 1001."),
        (check_since, ("last week",), "since", "--since", "expected an ISO 8601 date or time, got 'last week'."),
    ],
)
def test_the_api_and_the_cli_say_a_value_out_of_bounds_in_the_same_words(
    check: Callable[..., None], values: tuple[object, ...], parameter: str, option: str, words: str
) -> None:
    with pytest.raises(OutOfBounds) as refused:
        check(*values)
    assert refused.value.status == 400
    assert refused.value.openai_body()["error"] == {
        "message": f"Invalid '{parameter}': {words}",
        "type": "invalid_request_error",
        "param": parameter,
        "code": None,
    }
    assert str(out_of_bounds(refused.value)) == f"Invalid {option}: {words}"


def test_a_limit_out_of_bounds_names_it() -> None:
    with pytest.raises(OutOfBounds, match=r"^Invalid 'limit': expected a whole number from 1 to 500, got 501\.$"):
        check_limit(501, 500)


def test_values_in_bounds_pass() -> None:
    check_page(1_000_000, 1000, 1000)
    check_limit(500, 500)
    check_since("2026-01-31")
    check_since("2026-01-31T12:00:00+00:00")
    check_since(None)
