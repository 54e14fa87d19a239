"""What every fuzzed request is held to, and the tally of what broke it.

A fuzzed request may be refused or served, but never with a 5xx of the gateway's own (an upstream's
5xx relayed is the upstream's: the gateway's log line for the request names the upstream's failure),
never with a traceback in the gateway's log, and never moving money unless it was served: a request
answered with an error leaves the team's balance as it was, and one refused before its upstream was
called leaves the held amount as it was too. Every served request is charged exactly once (checked
once a whole run is over: ``tollgate ledger verify``).

Failures are tallied, not raised on the spot, so that one run reports every distinct failure —
its route, status and message or traceback, with the smallest input that showed it — rather than
the first. ``Tally.summary`` is the one line ``python -m scripts.fuzz`` prints.

And every case must leave the audit history projection able to keep up: after each one, the
projection's position is read against the newest event (``tests/support/fuzz/projection.py``),
and a case whose events it has not passed within a few seconds is a failure of its own.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import httpx
from hypothesis import HealthCheck, Phase, example, given, seed, settings
from hypothesis.strategies import SearchStrategy

from tests.support import plain_http
from tests.support.fuzz.projection import ProjectionWatch, Stall
from tests.support.gateway import ADMIN_KEY, Gateway

#: The bounded run of ``make test``: few examples, derandomized (the same inputs every run).
#: ``TOLLGATE_FUZZ_EXAMPLES`` raises the count and ``TOLLGATE_FUZZ_SEED`` sets a random seed (scripts/fuzz.py).
EXAMPLES = int(os.environ.get("TOLLGATE_FUZZ_EXAMPLES", "0")) or None
SEED = os.environ.get("TOLLGATE_FUZZ_SEED")


#: Examples per fuzzer in the bounded run.
BOUNDED = 12


def fuzz(
    test: Callable[..., None],
    explicit: list[dict[str, Any]] | None = None,
    *,
    bounded: int = BOUNDED,
    **strategies: SearchStrategy[Any],
) -> None:
    """Run ``test`` on generated arguments: ``bounded`` examples, the same ones every run, unless the
    environment asks for more (and a seed); and first on each of the ``explicit`` arguments (the
    inputs of findings, which every run must try). Failures are tallied by the test itself, so
    nothing is shrunk: every example is new."""
    runner = given(**strategies)(test)
    for arguments in reversed(explicit or []):
        runner = example(**arguments)(runner)
    if SEED is not None:
        runner = seed(int(SEED))(runner)
    settings(
        max_examples=EXAMPLES or bounded,
        deadline=None,
        database=None,
        derandomize=SEED is None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )(runner)()


@dataclass
class Failure:
    #: "5xx", "traceback", "balance", "held", "hang", "projection"; "shape" (a refusal not in its endpoint's
    #: error shape), "answer" (a served answer that is not one), "charge" (not charged exactly once),
    #: "recorded" (the charge recorded other than what was sent), "cli" (a command's traceback or exit code)
    kind: str
    route: str
    status: int | None
    detail: str
    example: bytes
    count: int = 1


@dataclass
class Tally:
    cases: int = 0
    served: int = 0
    failures: dict[tuple[str, str, int | None, str], Failure] = field(default_factory=dict)
    #: How many events the audit history projection was behind at the end of the run (None: not read).
    behind: int | None = None

    def fail(self, kind: str, route: str, status: int | None, detail: str, example: bytes) -> None:
        key = (kind, route, status, detail[:200])
        known = self.failures.get(key)
        if known is None:
            self.failures[key] = Failure(kind, route, status, detail, example)
            return
        known.count += 1
        if len(example) < len(known.example):
            known.example = example

    def of_kind(self, kind: str) -> int:
        return sum(f.count for f in self.failures.values() if f.kind == kind)

    def add(self, other: Tally) -> None:
        self.cases += other.cases
        self.served += other.served
        for key, failure in other.failures.items():
            self.failures.setdefault(key, failure)

    def projections(self) -> str:
        if self.behind is None:
            return "projections not read"
        return "projections current" if self.behind == 0 else f"projections {self.behind} events behind"

    def summary(self) -> str:
        return (
            f"fuzz: {self.cases} cases ({self.served} served), {self.of_kind('5xx')} gateway 5xx, "
            f"{self.of_kind('traceback')} tracebacks, {self.of_kind('balance') + self.of_kind('held')} "
            f"balance violations, {len(self.failures)} distinct failures, {self.projections()}"
        )

    def report(self) -> str:
        lines = []
        for f in self.failures.values():
            shown = f.example[:300] + (b"..." if len(f.example) > 300 else b"")
            lines.append(f"[{f.kind}] {f.route} -> {f.status} (x{f.count}): {f.detail}\n    input: {shown!r}")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary(),
            "cases": self.cases,
            "behind": self.behind,
            "failures": [
                {
                    "kind": f.kind,
                    "route": f.route,
                    "status": f.status,
                    "detail": f.detail,
                    "count": f.count,
                    "example": f.example[:2000].decode("utf-8", "backslashreplace"),
                }
                for f in self.failures.values()
            ],
        }


class Ledger:
    """The team's balance and held amount, as the gateway's own ledger writer has them (admin API);
    and its requests as the ledger charged them (``GET /v1/requests/{id}`` with the team's ``key``,
    which reads the charge itself, there the moment its client has the answer). A context manager: its
    HTTP client's connections close at its end."""

    def __init__(self, gateway: Gateway, team: str, key: str = "") -> None:
        self._url = f"{gateway.root_url}/admin/teams/{team}"
        self._http = plain_http.Client(headers={"authorization": f"Bearer {ADMIN_KEY}"}, timeout=30)
        self._requests = f"{gateway.root_url}/v1/requests"
        self._key = key

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def request(self, request_id: str) -> httpx.Response:
        return self._http.get(f"{self._requests}/{request_id}", headers={"authorization": f"Bearer {self._key}"})

    def now(self) -> tuple[Decimal, Decimal]:
        body = self._http.get(self._url).json()
        return Decimal(str(body["balance"])), Decimal(str(body["held"]))

    def settled(self, within: float = 10.0) -> tuple[Decimal, Decimal] | None:
        """The balance once nothing is held (credit leases given back), or None if it never came to that."""
        deadline = time.monotonic() + within
        while True:
            balance, held = self.now()
            if held == 0:
                return balance, held
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)


class LogWatch:
    """The gateway's log lines that carry a traceback, from where the watch last looked."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._seen = len(gateway.output())

    def tracebacks(self) -> list[str]:
        time.sleep(0.15)  # lines are written in batches, a tenth of a second apart
        text = self._gateway.output()
        new, self._seen = text[self._seen :], len(text)
        found = []
        for line in new.splitlines():
            try:
                record = json.loads(line) if line.startswith("{") else None
            except json.JSONDecodeError:
                record = None
            if record is not None and record.get("exception"):
                found.append(f"{record.get('message', '')}: {_where(record['exception'])}")
            elif record is None and "Traceback" in line:
                found.append(line[:200])
        return found


class Run:
    """One fuzzer's tally, the gateway's log from its start, and the projection's watch (shared by a
    module's fuzzers, which settles it at the module's end: conftest.py): ``check`` fails the test
    on any failure, tracebacks logged meanwhile and a projection left behind included, naming each
    with its smallest input."""

    def __init__(self, gateway: Gateway, projection: ProjectionWatch) -> None:
        self.gateway = gateway
        self.tally = Tally()
        self.watch = LogWatch(gateway)
        self.projection = projection

    def case(self) -> None:
        """A case begins (its events are those written from now until ``done``)."""
        self.tally.cases += 1
        self.projection.before_case()

    def done(self, route: str, example: bytes) -> None:
        """A case ended: a stall of the projection behind an earlier case's events is that case's failure."""
        self._stalled(self.projection.after_case(route, example))

    def _stalled(self, stall: Stall | None) -> None:
        if stall is not None:
            stall.tally(self.tally)

    def check(self) -> None:
        for traceback in self.watch.tracebacks():
            self.tally.fail("traceback", "(log)", None, traceback, b"")
        assert not self.tally.failures, f"{self.tally.summary()}\n{self.tally.report()}"


def _where(traceback: str) -> str:
    """A traceback's exception and the gateway's own line it was raised under, e.g.
    ``RecursionError: … at app/http/routes/request_body.py:17 in read_json_object``."""
    lines = [line.strip() for line in traceback.strip().splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith("File ") and "/site-packages/" not in line]
    where = ""
    if ours:
        file, _, rest = ours[-1].partition(", line ")
        where = f" at {'/'.join(file.strip(chr(34)).split('/')[-3:])}:{rest.replace(', in ', ' in ')}"
    return (lines[-1][:150] if lines else "") + where


def upstream_failed(gateway: Gateway, response: httpx.Response) -> bool:
    """Whether a 5xx was the upstream's (its failure named in the request's log line), not the gateway's."""
    request_id = response.headers.get("x-request-id")
    if request_id is None:
        return False
    try:
        line = gateway.access_line(request_id, within=3)
    except AssertionError:
        return False
    upstream = line.get("upstream") or {}
    return bool(upstream.get("errors"))


def upstream_called(gateway: Gateway, response: httpx.Response) -> bool:
    request_id = response.headers.get("x-request-id")
    if request_id is None:
        return False
    try:
        line = gateway.access_line(request_id, within=3)
    except AssertionError:
        return True  # unknown: do not accuse the gateway
    return bool((line.get("upstream") or {}).get("attempts"))


@dataclass(frozen=True)
class Sent:
    """A fuzzed request's answer, and the team's balance before it (nothing held)."""

    response: httpx.Response
    before: Decimal


def exercise(
    run: Run,
    ledger: Ledger,
    route: str,
    url: str,
    headers: dict[str, Any],
    body: bytes,
    example: bytes | None = None,
    send: Callable[[], httpx.Response] | None = None,
) -> Sent | None:
    """Send one fuzzed body, and hold its answer to the rules above (a 5xx is named by the traceback
    it logged, if any, so that each cause is a failure of its own); ``example``: the input the case
    is tallied with, if not the body (a header's value); ``send``: how it is sent, if not by httpx."""
    shown = body if example is None else example
    before = ledger.settled()
    if before is None:
        run.tally.fail("held", route, None, "a hold or lease stayed open after an earlier request", shown)
        return None
    run.case()
    try:
        response = send() if send is not None else plain_http.post(url, content=body, headers=headers, timeout=60)
    except (httpx.HTTPError, OSError) as exc:
        run.tally.fail("hang", route, None, f"no answer: {exc!r}", shown)
        return None
    finally:
        run.done(route, shown)
    status = response.status_code
    if 200 <= status < 300:
        run.tally.served += 1
        return Sent(response, before[0])
    if status >= 500 and not upstream_failed(run.gateway, response):
        logged = run.watch.tracebacks()
        run.tally.fail("5xx", route, status, logged[0] if logged else _message(response), shown)
    balance, held = ledger.now()
    if balance != before[0]:
        run.tally.fail("balance", route, status, f"balance {before[0]} -> {balance} for an error answer", shown)
    if held != 0 and not upstream_called(run.gateway, response):
        run.tally.fail("held", route, status, f"held 0 -> {held} for a request refused before the upstream", shown)
    return Sent(response, before[0])


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("message") if isinstance(error, dict) else body)[:200]
