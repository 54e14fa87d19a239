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
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.strategies import SearchStrategy

from tests.support.gateway import ADMIN_KEY, Gateway

#: The bounded run of ``make test``: few examples, derandomized (the same inputs every run).
#: ``TOLLGATE_FUZZ_EXAMPLES`` raises the count and ``TOLLGATE_FUZZ_SEED`` sets a random seed (scripts/fuzz.py).
EXAMPLES = int(os.environ.get("TOLLGATE_FUZZ_EXAMPLES", "0")) or None
SEED = os.environ.get("TOLLGATE_FUZZ_SEED")


#: Examples per fuzzer in the bounded run.
BOUNDED = 12


def fuzz(test: Callable[..., None], **strategies: SearchStrategy[Any]) -> None:
    """Run ``test`` on generated arguments: ``BOUNDED`` examples, the same ones every run, unless the
    environment asks for more (and a seed). Failures are tallied by the test itself, so nothing is
    shrunk: every example is new."""
    runner = given(**strategies)(test)
    if SEED is not None:
        runner = seed(int(SEED))(runner)
    settings(max_examples=EXAMPLES or BOUNDED, deadline=None, database=None, derandomize=SEED is None,
             phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))(runner)()


@dataclass
class Failure:
    kind: str  # "5xx", "traceback", "balance", "held", "hang"
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

    def summary(self) -> str:
        return (f"fuzz: {self.cases} cases ({self.served} served), {self.of_kind('5xx')} gateway 5xx, "
                f"{self.of_kind('traceback')} tracebacks, {self.of_kind('balance') + self.of_kind('held')} "
                f"balance violations, {len(self.failures)} distinct failures")

    def report(self) -> str:
        lines = []
        for f in self.failures.values():
            shown = f.example[:300] + (b"..." if len(f.example) > 300 else b"")
            lines.append(f"[{f.kind}] {f.route} -> {f.status} (x{f.count}): {f.detail}\n    input: {shown!r}")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {"summary": self.summary(), "cases": self.cases, "failures": [
            {"kind": f.kind, "route": f.route, "status": f.status, "detail": f.detail, "count": f.count,
             "example": f.example[:2000].decode("utf-8", "backslashreplace")} for f in self.failures.values()]}


class Ledger:
    """The team's balance and held amount, as the gateway's own ledger writer has them (admin API)."""

    def __init__(self, gateway: Gateway, team: str) -> None:
        self._url = f"{gateway.root_url}/admin/teams/{team}"
        self._http = httpx.Client(headers={"authorization": f"Bearer {ADMIN_KEY}"}, timeout=30)

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
        new, self._seen = text[self._seen:], len(text)
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
    """One fuzzer's tally, and the gateway's log from its start: ``check`` fails the test on any
    failure, tracebacks logged meanwhile included, naming each with its smallest input."""

    def __init__(self, gateway: Gateway) -> None:
        self.tally = Tally()
        self.watch = LogWatch(gateway)

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


def exercise(gateway: Gateway, ledger: Ledger, tally: Tally, watch: LogWatch, route: str, url: str,
             headers: dict[str, str], body: bytes) -> httpx.Response | None:
    """Send one fuzzed body, and hold its answer to the rules above (a 5xx is named by the traceback
    it logged, if any, so that each cause is a failure of its own)."""
    before = ledger.settled()
    if before is None:
        tally.fail("held", route, None, "a hold or lease stayed open after an earlier request", body)
        return None
    tally.cases += 1
    try:
        response = httpx.post(url, content=body, headers=headers, timeout=60)
    except httpx.HTTPError as exc:
        tally.fail("hang", route, None, f"no answer: {exc!r}", body)
        return None
    status = response.status_code
    if 200 <= status < 300:
        tally.served += 1
        return response
    if status >= 500 and not upstream_failed(gateway, response):
        logged = watch.tracebacks()
        tally.fail("5xx", route, status, logged[0] if logged else _message(response), body)
    balance, held = ledger.now()
    if balance != before[0]:
        tally.fail("balance", route, status, f"balance {before[0]} -> {balance} for an error answer", body)
    if held != 0 and not upstream_called(gateway, response):
        tally.fail("held", route, status, f"held 0 -> {held} for a request refused before the upstream", body)
    return response


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("message") if isinstance(error, dict) else body)[:200]
