"""Generated built-in tools (``tests/support/fuzz/tools.py``: types from the whole Unicode range, CR,
LF and NUL included) on the three generation endpoints, passed through and translated, on models
that pass, drop or refuse them, plain and streamed.

Beyond what every fuzzed request is held to (tests/support/fuzz/harness.py), a served one is a
proper answer — JSON of its endpoint's shape, or a stream that reaches its terminal event — charged
exactly once, and each tool it says it dropped (``x-tollgate-dropped-tools``, percent-encoded) is
one the request declared; a refused one is a 4xx in its endpoint's shape and moved no money.
"""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from tests.support.fuzz.harness import Ledger, Run, exercise, fuzz
from tests.support.fuzz.served import PATHS, check_served, headers_for
from tests.support.fuzz.tools import ToolCase, explicit, tool_cases
from tests.support.gateway import Gateway
from tests.support.teams import Team


@pytest.mark.parametrize("endpoint", ["chat", "responses", "messages"])
def test_no_built_in_tool_breaks_an_answer_that_was_charged(
    fuzz_gateway: Gateway, fuzz_team: Team, ledger: Ledger, run: Run, endpoint: str
):
    url, headers = fuzz_gateway.root_url + PATHS[endpoint], headers_for(endpoint, fuzz_team.key)

    def one(case: ToolCase) -> None:
        route = f"built-in tools {endpoint}→{case.model}{' stream' if case.stream else ''}"
        sent = exercise(run, ledger, route, url, headers, case.body)
        if check_served(run, ledger, sent, endpoint, case.stream, route, case.body) is None or sent is None:
            return
        said = sent.response.headers.get("x-tollgate-dropped-tools")
        # each name percent-encoded (a comma in one too); an empty type's name is an empty item, which
        # the header's trailing space is trimmed of
        dropped = {unquote(name.strip()) for name in (said or "").split(",") if name.strip()}
        if not dropped <= case.names:
            run.tally.fail(
                "answer",
                route,
                sent.response.status_code,
                f"x-tollgate-dropped-tools names tools the request did not declare: {said[:100]!r}",
                case.body,
            )

    fuzz(one, case=tool_cases(endpoint), explicit=[{"case": case} for case in explicit(endpoint)])
    run.check()
