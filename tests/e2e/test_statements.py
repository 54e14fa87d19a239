"""Monthly statements, end to end: real traffic through the official OpenAI and Anthropic SDKs (plain
and streamed), top-ups and adjustments from the CLI and the admin API, then the month's statement from
the CLI and the admin API, as JSON and CSV. It reconciles, its totals are what the SDKs were told, its
closing balance is the team's balance; its chained form verifies, and fails once a digit is changed —
even with the chain recomputed, when verified against the ledger."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from app.settings_file import CONFIG_ENV
from app.store.event_store import LedgerStore, open_ledger_store
from domain.ledger import TeamLedger, team_id
from domain.ledger_holds import RequestOnLedger
from domain.settings import parse_settings
from projections.statement_chain import COLUMNS, PREV_HASH, chained
from tests.support import plain_http
from tests.support.backend import RawDatabase
from tests.support.cli_fork import run_tollgate
from tests.support.gateway import ADMIN_KEY, GATEWAY_ENV, Gateway
from tests.support.long_history import PRICE, USAGE
from tests.support.teams import Team, Teams

pytestmark = pytest.mark.usefixtures("ledger_verified_after")


@dataclass
class Spent:
    """What the SDKs were told: each request's cost (credits) and tokens, by model."""

    cost: dict[str, Decimal] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    prompt: dict[str, int] = field(default_factory=dict)  # every prompt token, cached or not
    output: dict[str, int] = field(default_factory=dict)

    def add(self, model: str, cost: object, prompt: int, output: int) -> None:
        self.cost[model] = self.cost.get(model, Decimal(0)) + Decimal(str(cost))
        self.requests[model] = self.requests.get(model, 0) + 1
        self.prompt[model] = self.prompt.get(model, 0) + prompt
        self.output[model] = self.output.get(model, 0) + output


@dataclass
class Month:
    team: Team
    month: str
    spent: Spent
    balance: Decimal  # GET /v1/credits, once everything settled


def _admin(gateway: Gateway) -> httpx.Client:
    return plain_http.Client(
        base_url=gateway.root_url + "/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30
    )


def _openai_traffic(gateway: Gateway, team: Team, spent: Spent) -> None:
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        for content in ("hello there statement", "w w w w w w [[cached:4]]"):
            completion = client.chat.completions.create(
                model="fake-gpt", messages=[{"role": "user", "content": content}]
            )
            usage = completion.usage
            assert usage is not None
            spent.add("fake-gpt", usage.model_extra["cost"]["credits"], usage.prompt_tokens, usage.completion_tokens)
        stream = client.chat.completions.create(
            model="fake-gpt",
            messages=[{"role": "user", "content": "a streamed one"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        (final,) = [chunk.usage for chunk in stream if chunk.usage is not None]
        spent.add("fake-gpt", final.model_extra["cost"]["credits"], final.prompt_tokens, final.completion_tokens)


def _anthropic_traffic(gateway: Gateway, team: Team, spent: Spent) -> None:
    with anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0) as claude:
        message = claude.messages.create(
            model="fake-claude", max_tokens=100, messages=[{"role": "user", "content": "hello from the statement test"}]
        )
        usage = message.usage
        prompt = usage.input_tokens + (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
        spent.add("fake-claude", usage.model_extra["cost"]["credits"], prompt, usage.output_tokens)
        with claude.messages.stream(
            model="fake-claude", max_tokens=100, messages=[{"role": "user", "content": "and a streamed one"}]
        ) as stream:
            events = list(stream)
            final = stream.get_final_message()
        (delta,) = [e for e in events if e.type == "message_delta"]
        usage = final.usage
        prompt = usage.input_tokens + (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
        spent.add("fake-claude", delta.usage.model_extra["cost"]["credits"], prompt, usage.output_tokens)


@pytest.fixture(scope="module")
def month(gateway: Gateway, teams: Teams) -> Month:
    """A team opened with 100 credits: three OpenAI requests (one streamed, one with cached tokens),
    a top-up, an adjustment each way (the CLI's and the admin API's), then two Anthropic messages."""
    team = teams.open("100")
    spent = Spent()
    _openai_traffic(gateway, team, spent)
    gateway.wait_until_nothing_held(team.name)  # the gateway's lease returned: an adjustment takes no more
    gateway.cli("credits", "add", "--team", team.name, "25", "--reference", "INV-2026-11")
    taken = gateway.cli(
        "credits", "adjust", "--team", team.name, "--", "-5", "--reason", "billed twice", "--reference", "T-7"
    )
    assert "Took 5 credits" in taken.stdout
    with _admin(gateway) as admin:
        given = admin.post(f"/teams/{team.name}/adjustments", json={"amount": "1.25", "reason": "goodwill"})
        assert given.status_code == 200, given.text
    _anthropic_traffic(gateway, team, spent)
    gateway.wait_until_nothing_held(team.name)
    answer = plain_http.get(gateway.base_url + "/credits", headers={"Authorization": f"Bearer {team.key}"})
    balance = json.loads(answer.content, parse_float=Decimal)["data"]["balance"]
    return Month(team, datetime.now(UTC).strftime("%Y-%m"), spent, balance)


def _statement(gateway: Gateway, month: Month, *args: str) -> str:
    return gateway.cli("ledger", "statement", "--team", month.team.name, "--month", month.month, *args).stdout


def test_the_statement_reconciles_with_the_ledger_and_what_the_sdks_were_told(gateway: Gateway, month: Month):
    document = json.loads(_statement(gateway, month))
    assert (document["team"], document["month"], document["reconciled"]) == (month.team.name, month.month, True)
    reconciliation = document["reconciliation"]
    assert reconciliation["reconciled"] is True
    assert reconciliation["note"].startswith("reconciled: opening 0 + top-ups 125 - charges ")
    assert "the audit history's 9 entries agree" in reconciliation["note"]

    entries = document["entries"]
    assert [e["kind"] for e in entries] == [
        "top_up",
        "charge",
        "charge",
        "charge",
        "top_up",
        "adjustment",
        "adjustment",
        "charge",
        "charge",
    ]
    assert [e["reference"] for e in entries if e["kind"] != "charge"] == ["opening balance", "INV-2026-11", "T-7", ""]
    assert [e.get("reason") for e in entries if e["kind"] == "adjustment"] == ["billed twice", "goodwill"]
    assert [e["version"] for e in entries] == sorted(e["version"] for e in entries)

    spent, total = month.spent, sum(month.spent.cost.values())
    charges = document["charges"]
    assert Decimal(charges["amount"]) == total
    assert charges["amount_micros"] == int(total * 1_000_000)
    assert charges["count"] == sum(spent.requests.values()) == 5
    assert charges["input_tokens"] + charges["cache_write_tokens"] + charges["cache_hit_tokens"] == sum(
        spent.prompt.values()
    )
    assert charges["output_tokens"] == sum(spent.output.values())
    assert charges["cache_hit_tokens"] == 4
    by_model = {row["model"]: row for row in document["charges_by_model"]}
    assert set(by_model) == {"fake-gpt", "fake-claude"}
    for model, row in by_model.items():
        assert (Decimal(row["amount"]), row["count"]) == (spent.cost[model], spent.requests[model]), model
        assert row["input_tokens"] + row["cache_write_tokens"] + row["cache_hit_tokens"] == spent.prompt[model]
        assert row["output_tokens"] == spent.output[model]
    (key,) = document["charges_by_key"]  # the team's one key
    assert (Decimal(key["amount"]), key["count"]) == (total, 5)

    assert (document["opening_balance"]["amount"], document["top_ups"]["amount"], document["top_ups"]["count"]) == (
        "0",
        "125",
        2,
    )
    assert (document["adjustments"]["amount"], document["adjustments"]["count"]) == ("-3.75", 2)
    closing = Decimal(document["closing_balance"]["amount"])
    assert closing == Decimal(125) - total - Decimal("3.75") == month.balance
    assert Decimal(entries[-1]["balance_after"]) == closing
    with _admin(gateway) as admin:
        team = json.loads(admin.get(f"/teams/{month.team.name}").content, parse_float=Decimal)
        assert team["balance"] == closing
        end = datetime.fromisoformat(document["to"])
        at_end = admin.get(
            f"/teams/{month.team.name}/balance", params={"at": min(end, datetime.now(UTC)).isoformat()}
        ).json()
        assert at_end["balance_micros"] == document["closing_balance"]["amount_micros"]
        assert at_end["version"] == document["closing_balance"]["version"]


def test_the_admin_api_answers_the_clis_statement_as_json_and_csv(gateway: Gateway, month: Month):
    with _admin(gateway) as admin:
        for fmt, media_type in (("json", "application/json"), ("csv", "text/csv")):
            answer = admin.get(f"/teams/{month.team.name}/statements/{month.month}", params={"format": fmt})
            assert answer.status_code == 200, answer.text
            assert answer.headers["content-type"].startswith(media_type)
            assert (
                answer.headers["content-disposition"]
                == f'attachment; filename="tollgate-{month.team.name}-statement-{month.month}.{fmt}"'
            )
            assert answer.text == _statement(gateway, month, "--format", fmt)
        default = admin.get(f"/teams/{month.team.name}/statements/{month.month}")
        assert default.headers["content-type"].startswith("application/json")
        assert json.loads(default.text)["reconciled"] is True


def test_the_csv_statement_is_one_header_line_then_rows_a_spreadsheet_reads(gateway: Gateway, month: Month):
    rows = list(csv.DictReader(io.StringIO(_statement(gateway, month, "--format", "csv"))))
    assert list(rows[0]) == list(COLUMNS)
    entries = [row for row in rows if row["section"] == "entry"]
    summary = {row["section"]: row for row in rows if row["section"] != "entry"}
    assert sum(int(e["amount_micros"]) for e in entries) == int(summary["closing_balance"]["amount_micros"]) - int(
        summary["opening_balance"]["amount_micros"]
    )
    assert summary["reconciliation"]["reconciled"] == "true"
    assert {row["team"] for row in rows} == {month.team.name}
    assert Decimal(summary["charges"]["amount"]) == sum(month.spent.cost.values())


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_the_chained_statement_verifies_and_a_changed_digit_does_not(
    gateway: Gateway, month: Month, tmp_path: Path, fmt: str
):
    path = tmp_path / f"statement.{fmt}"
    wrote = gateway.cli(
        "ledger",
        "statement",
        "--team",
        month.team.name,
        "--month",
        month.month,
        "--format",
        fmt,
        "--chained",
        "--output",
        str(path),
    )
    assert "reconciled" in wrote.stdout
    verified = gateway.cli("ledger", "verify", "--statement", str(path))
    assert "Statement verified" in verified.stdout
    assert "It is the statement the ledger gives" in verified.stdout
    text = path.read_text()

    # one digit of one charge's amount, changed: the chain breaks there
    charge = next(row for row in _rows(text, fmt) if row.get("kind") == "charge")
    digits = str(charge["amount_micros"])
    changed = digits[:-1] + str((int(digits[-1]) + 1) % 10)
    tampered = tmp_path / f"tampered.{fmt}"
    tampered.write_text(
        text.replace(
            f",{digits}," if fmt == "csv" else f'"amount_micros": {digits},',
            f",{changed}," if fmt == "csv" else f'"amount_micros": {changed},',
            1,
        )
    )
    failed = gateway.cli("ledger", "verify", "--statement", str(tampered), check=False)
    assert failed.returncode == 1
    assert "Statement verification FAILED" in failed.stderr
    where = "line 3" if fmt == "csv" else "entries[1]"
    assert f"the hash chain is broken at row 2 ({where}), charge at version" in failed.stderr

    # the same change with every hash after it recomputed: the chain holds, the ledger does not agree
    rows = [{k: v for k, v in row.items() if k != PREV_HASH} for row in _rows(text, fmt)]
    rows[1]["amount_micros"] = int(changed)
    relinked, final = chained(month.team.name, month.month, rows)
    forged = tmp_path / f"forged.{fmt}"
    forged.write_text(_as_csv(relinked, final) if fmt == "csv" else _as_json(text, relinked, final))
    refused = gateway.cli("ledger", "verify", "--statement", str(forged), check=False)
    assert refused.returncode == 1
    assert f"row 2 ({where}), charge at version" in refused.stderr
    assert f"its amount_micros is '{changed}' in the file, '{digits}' in the ledger" in refused.stderr


def test_the_admin_apis_chained_statement_verifies(gateway: Gateway, month: Month, tmp_path: Path):
    with _admin(gateway) as admin:
        answer = admin.get(
            f"/teams/{month.team.name}/statements/{month.month}", params={"format": "csv", "chained": "true"}
        )
    assert answer.status_code == 200
    path = tmp_path / "from-the-api.csv"
    path.write_bytes(answer.content)
    assert gateway.cli("ledger", "verify", "--statement", str(path)).returncode == 0
    cli = tmp_path / "from-the-cli.json"
    gateway.cli(
        "ledger", "statement", "--team", month.team.name, "--month", month.month, "--chained", "--output", str(cli)
    )
    assert json.loads(cli.read_text())["final_hash"] == answer.text.splitlines()[-1].split(",")[-1]


def _verify_without_a_ledger(path: Path) -> subprocess.CompletedProcess[str]:
    """``tollgate ledger verify --statement FILE`` with no configuration (neither --config nor the variable)."""
    env = {k: v for k, v in {**os.environ, **GATEWAY_ENV}.items() if k != CONFIG_ENV}
    return run_tollgate(["ledger", "verify", "--statement", str(path)], env, timeout=60)


def _chained_json(gateway: Gateway, month: Month, tmp_path: Path) -> str:
    path = tmp_path / "genuine.json"
    gateway.cli(
        "ledger", "statement", "--team", month.team.name, "--month", month.month, "--chained", "--output", str(path)
    )
    return path.read_text()


@pytest.mark.parametrize("forgery", ["members beside the rows", "a member given twice, the forged value first"])
def test_a_json_statement_saying_more_than_its_rows_is_refused(
    gateway: Gateway, month: Month, tmp_path: Path, forgery: str
):
    """What the hash chain does not cover cannot ride along: members of its own (``amount_due``,
    ``payment_status``) beside a genuine statement's rows, or a member named twice with the forged
    value first (a reader taking the first value sees it; one taking the last checks the genuine one)."""
    text = _chained_json(gateway, month, tmp_path)
    if forgery == "members beside the rows":
        forged = json.dumps({**json.loads(text), "amount_due": "0.00", "payment_status": "paid"})
        says = "'amount_due' is not a member a statement writes there"
    else:
        forged = text.replace('"closing_balance": {', '"closing_balance": {"amount": "1000000", ', 1)
        assert json.loads(forged)["closing_balance"]["amount"] == json.loads(text)["closing_balance"]["amount"]
        says = "the member 'amount' is given twice in one object"
    path = tmp_path / "forged.json"
    path.write_text(forged)
    for refused in (
        gateway.cli("ledger", "verify", "--statement", str(path), check=False),
        _verify_without_a_ledger(path),
    ):
        assert refused.returncode == 1, refused.stdout
        assert "Statement verification FAILED" in refused.stderr
        assert says in refused.stderr
        assert "verified" not in refused.stdout


def test_without_a_ledger_only_the_chain_is_checked_and_it_says_so(gateway: Gateway, month: Month, tmp_path: Path):
    """No configuration: the chain is all that can be checked, and a chain recomputed after a change
    holds — so the command never says "verified", and exits 3 (0 only against the ledger)."""
    genuine = tmp_path / "genuine.json"
    genuine.write_text(_chained_json(gateway, month, tmp_path))
    rows = [{k: v for k, v in row.items() if k != PREV_HASH} for row in _rows(genuine.read_text(), "json")]
    rows[1]["amount_micros"] += 1
    relinked, final = chained(month.team.name, month.month, rows)
    forged = tmp_path / "forged.json"
    forged.write_text(_as_json(genuine.read_text(), relinked, final))
    for path in (genuine, forged):
        alone = _verify_without_a_ledger(path)
        assert alone.returncode == 3, alone.stderr
        assert "Statement NOT verified: only its hash chain was checked" in alone.stdout
        assert "Statement verified" not in alone.stdout
    assert gateway.cli("ledger", "verify", "--statement", str(genuine)).returncode == 0
    assert gateway.cli("ledger", "verify", "--statement", str(forged), check=False).returncode == 1


def _backdated(store: LedgerStore, team: TeamLedger, charges: range) -> None:
    """``charges`` more requests of ``team`` (a hold and a charge each), saved with its read models."""
    for i in charges:
        team.place_hold(RequestOnLedger(f"{team.name}-r{i}", "k1", "fake-gpt", "chat.completions"), 10_000)
        team.charge(
            RequestOnLedger(f"{team.name}-r{i}", "k1", "fake-gpt", "chat.completions"), USAGE, PRICE, Decimal(100)
        )
    store.save_teams([team])


def test_a_closed_month_cut_short_at_an_earlier_version_fails(
    gateway: Gateway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """March 2025, a month long over: its statement written when 87 of its 109 charges were in the
    ledger is the statement the ledger gives up to that version, chain and all — but not the month's,
    and verifying it says so; the whole month's statement verifies."""
    march = datetime(2025, 3, 10, 12, tzinfo=UTC)
    monkeypatch.setattr("eventsourcing.domain.datetime_now_with_tzinfo", lambda: march)
    monkeypatch.setattr("domain.clock.now", lambda: march)
    settings = parse_settings(gateway.config.read_text(), str(gateway.config))
    store = open_ledger_store(settings.database_url, gateway.config.parent, pool_size=2)
    name = f"march-{os.getpid()}-{datetime.now(UTC).strftime('%H%M%S%f')}"
    try:  # written beside the gateway, as by another gateway process, in March 2025
        team = TeamLedger.open(name)
        team.add_credits(10**9, "opening")
        team.issue_key("k1", "hash-" + name)
        _backdated(store, team, range(87))
        cut = tmp_path / "march-so-far.json"
        gateway.cli("ledger", "statement", "--team", name, "--month", "2025-03", "--chained", "--output", str(cut))
        loaded = store.find_team(team_id(name))
        assert loaded is not None
        _backdated(store, loaded, range(87, 109))
    finally:
        store.close()
    assert sum(e["kind"] == "charge" for e in json.loads(cut.read_text())["entries"]) == 87

    refused = gateway.cli("ledger", "verify", "--statement", str(cut), check=False)
    assert refused.returncode == 1, refused.stdout
    assert "2025-03 is over, and the statement stops before its end" in refused.stderr
    assert "it has 87 charges, the month 109" in refused.stderr

    whole = tmp_path / "march.json"
    gateway.cli("ledger", "statement", "--team", name, "--month", "2025-03", "--chained", "--output", str(whole))
    verified = gateway.cli("ledger", "verify", "--statement", str(whole))
    assert "It is the statement the ledger gives" in verified.stdout
    assert "2025-03 is over, and the statement reaches its last event" in verified.stdout


def test_other_months_are_empty_and_open_where_the_last_closed(gateway: Gateway, month: Month):
    earlier = json.loads(_statement_of(gateway, month.team.name, "2020-01"))
    assert (earlier["entries"], earlier["closing_balance"]["amount"], earlier["reconciled"]) == ([], "0", True)
    later = json.loads(_statement_of(gateway, month.team.name, "2999-12"))
    assert later["entries"] == []
    assert later["opening_balance"]["amount"] == later["closing_balance"]["amount"] == f"{month.balance:f}"


def _statement_of(gateway: Gateway, team: str, month: str) -> str:
    return gateway.cli("ledger", "statement", "--team", team, "--month", month).stdout


def test_a_statement_that_does_not_reconcile_says_what_differs_and_the_command_fails(
    gateway: Gateway, month: Month, tmp_path: Path
):
    """The audit history altered behind the ledger's back (then put back, for the module's verify): the
    statement is still written, says it is not reconciled and why, and the command exits 1."""
    raw = RawDatabase.of_config(gateway.config)
    where = "WHERE team_name = ? AND kind = 'adjustment' AND reference = 'billed twice (T-7)'"
    raw.execute(f"UPDATE ledger_entries SET amount = amount - 1 {where}", (month.team.name,))
    try:
        path = tmp_path / "statement.json"
        result = gateway.cli(
            "ledger", "statement", "--team", month.team.name, "--month", month.month, "--output", str(path), check=False
        )
        with _admin(gateway) as admin:
            answer = admin.get(f"/teams/{month.team.name}/statements/{month.month}")
    finally:
        raw.execute(f"UPDATE ledger_entries SET amount = amount + 1 {where}", (month.team.name,))
    assert result.returncode == 1
    assert "NOT reconciled" in result.stdout
    assert (
        "the statement does not reconcile: the audit history has 2 adjustment entries of -3.750001 credits"
        in result.stderr
    )
    document = json.loads(path.read_text())
    assert document["reconciled"] is False
    assert document["reconciliation"]["note"].startswith("NOT RECONCILED: ")
    assert json.loads(answer.text)["reconciled"] is False  # the admin API says it in the statement too
    assert json.loads(_statement(gateway, month))["reconciled"] is True


def test_a_bad_month_an_unknown_team_and_a_team_key_are_refused(gateway: Gateway, month: Month):
    with _admin(gateway) as admin:
        for bad in ("2026-13", "november", "2026-1"):
            answer = admin.get(f"/teams/{month.team.name}/statements/{bad}")
            assert answer.status_code == 400, bad
            assert (answer.json()["error"]["type"], answer.json()["error"]["param"]) == (
                "invalid_request_error",
                "month",
            )
        assert (
            admin.get(f"/teams/{month.team.name}/statements/{month.month}", params={"format": "xml"}).status_code == 400
        )
        assert (
            admin.get(f"/teams/{month.team.name}/statements/{month.month}", params={"chained": "maybe"}).status_code
            == 400
        )
        unknown = admin.get(f"/teams/no-such-team/statements/{month.month}")
        assert unknown.status_code == 404
        assert "does not exist" in unknown.json()["error"]["message"]
    team_key = plain_http.get(
        f"{gateway.root_url}/admin/teams/{month.team.name}/statements/{month.month}",
        headers={"Authorization": f"Bearer {month.team.key}"},
    )
    assert team_key.status_code == 403
    refused = gateway.cli("ledger", "statement", "--team", month.team.name, "--month", "2026-13", check=False)
    assert refused.returncode == 2
    assert "invalid --month" in refused.stderr
    unknown_team = gateway.cli("ledger", "statement", "--team", "no-such-team", check=False)
    assert unknown_team.returncode == 1


def _rows(text: str, fmt: str) -> list[dict]:
    if fmt == "csv":
        lines = list(csv.DictReader(io.StringIO(text)))
        return [{k: int(v) if k == "amount_micros" and v else v for k, v in row.items()} for row in lines[:-1]]
    document = json.loads(text)
    rows = []
    for section in (
        "entries",
        "opening_balance",
        "top_ups",
        "charges_by_model",
        "charges_by_key",
        "charges",
        "adjustments",
        "closing_balance",
        "reconciliation",
        "log_checkpoint",
    ):
        value = document[section]
        for row in value if isinstance(value, list) else [value]:
            rows.append(
                {
                    **row,
                    "team": document["team"],
                    "month": document["month"],
                    "section": "entry" if section == "entries" else section,
                }
            )
    return rows


def _as_csv(rows: list[dict], final: str) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*COLUMNS, PREV_HASH])
    writer.writerows([[_cell(row.get(c)) for c in (*COLUMNS, PREV_HASH)] for row in rows])
    writer.writerow([rows[0]["team"], rows[0]["month"], "end", *[""] * (len(COLUMNS) - 3), final])
    return out.getvalue()


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _as_json(original: str, rows: list[dict], final: str) -> str:
    document = json.loads(original)
    flat = iter(rows)
    for section in (
        "entries",
        "opening_balance",
        "top_ups",
        "charges_by_model",
        "charges_by_key",
        "charges",
        "adjustments",
        "closing_balance",
        "reconciliation",
        "log_checkpoint",
    ):
        value = document[section]
        strip = ("team", "month", "section")
        if isinstance(value, list):
            document[section] = [{k: v for k, v in next(flat).items() if k not in strip} for _ in value]
        else:
            document[section] = {k: v for k, v in next(flat).items() if k not in strip}
    document["final_hash"] = final
    return json.dumps(document)
