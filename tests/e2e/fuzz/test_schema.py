"""Every public and admin route of the OpenAPI document at ``/schema``, exercised by schemathesis
with inputs that fit the document and inputs that do not: never a 5xx of the gateway's own, never a
traceback, and every answer as the document describes it (its status, its media type, its body)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.failures import FailureGroup

from tests.support.fuzz.harness import Run, fuzz, upstream_failed
from tests.support.gateway import ADMIN_KEY, Gateway
from tests.support.teams import Team

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
#: Examples of each route in each mode in make test: half the other fuzzers' bounded run, since this
#: one runs it for every route of the document (three minutes of a make test half at twelve);
#: ``scripts/fuzz.py`` (TOLLGATE_FUZZ_EXAMPLES) runs as many as asked.
PER_ROUTE = 6


def _operations(gateway: Gateway) -> list:
    schema = schemathesis.openapi.from_url(gateway.root_url + "/schema/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def _key_for(path: str, team: Team) -> str:
    return ADMIN_KEY if path.startswith(("/admin", "/metrics")) else team.key


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["fitting", "not-fitting"])
def test_every_documented_route_answers_as_documented_and_never_breaks(
    fuzz_gateway: Gateway, fuzz_team: Team, run: Run, mode
):
    operations = _operations(fuzz_gateway)
    assert len(operations) > 15  # public, admin and dashboard routes
    for operation in operations:
        one = _exercise(
            fuzz_gateway, run, f"{operation.method.upper()} {operation.path}", _key_for(operation.path, fuzz_team)
        )
        # Unsatisfiable: nothing of this kind to generate (a route without parameters has no input that does not fit)
        with contextlib.suppress(Unsatisfiable):
            fuzz(one, bounded=PER_ROUTE, case=operation.as_strategy(mode))
    run.check()


def _exercise(gateway: Gateway, run: Run, route: str, key: str) -> Callable[[Any], None]:
    """What one generated case of ``route`` goes through: sent with ``key``, its answer checked against
    the document, and any failure tallied under the route."""

    def one(case) -> None:
        run.case()
        headers = {"authorization": f"Bearer {key}", "x-api-key": key, "anthropic-version": "2023-06-01"}
        example = case.body if isinstance(case.body, bytes) else repr(case.body).encode()
        try:
            response = case.call(base_url=gateway.root_url, headers=headers, timeout=60)
        finally:
            run.done(route, example[:2000])
        if response.status_code >= 500 and upstream_failed(gateway, response):
            return  # the upstream's failure, relayed
        try:
            case.validate_response(response, checks=CHECKS)
        except (FailureGroup, Exception) as exc:  # noqa: BLE001 — each failed check is a finding, tallied
            kind = "5xx" if response.status_code >= 500 else "conformance"
            logged = run.watch.tracebacks() if kind == "5xx" else []
            detail = logged[0] if logged else _first_failure(exc)
            run.tally.fail(kind, route, response.status_code, detail, example[:2000])

    return one


def _first_failure(exc: BaseException) -> str:
    """The failed check's title and what it found, on one line, without the value it found it in
    (so that the same failure on different answers is one failure)."""
    text = str(exc.exceptions[0]) if isinstance(exc, BaseExceptionGroup) and exc.exceptions else str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    found = lines[1] if len(lines) > 1 else ""
    for verdict in (" is not of type ", " is not one of ", " is not valid under "):
        if verdict in found:
            found = "…" + verdict + found.split(verdict, 1)[1]
    return f"{lines[0] if lines else ''}: {found}"[:300]
