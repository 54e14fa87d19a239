"""Statements and the export anchored to the transparency log, through a real gateway and the CLI: a
chained statement (the CLI's CSV, the admin API's JSON) names the checkpoint it was made from and each
entry's leaf, and ``ledger verify --statement`` proves its rows in the log; an event changed in the
database fails it naming the row; the export's lines carry their leaves, the receipts' own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from domain.transparency.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from domain.transparency.keys import signer_from_seed
from domain.transparency.receipt import open_receipt
from tests.e2e.test_transparency_log import LOG, MONTH, _change_a_charge, _other_end_user, anchored_statement, chat
from tests.e2e.test_transparency_log import verify_statement as verify
from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway, verified_gateway, write_config
from tests.support.teams import Teams, teams_of


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    directory = tmp_path_factory.mktemp("anchored")
    config = write_config(directory, fake_upstream.base_url)
    config.write_text(config.read_text() + "\n[transparency]\ncheckpoint_seconds = 0.2\n")
    yield from verified_gateway(config, {"TOLLGATE_LOG_KEY": LOG.key_string})


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def test_a_statement_names_its_checkpoint_and_leaves_and_its_rows_are_proven_in_the_log(
    gateway: Gateway, teams: Teams, tmp_path: Path
):
    team = teams.open("50")
    receipts = [open_receipt(chat(gateway, team).headers["x-tollgate-receipt"], LOG.verifier) for _ in range(3)]
    gateway.wait_until_nothing_held(team.name)  # its idle lease given back: the team's history is still
    rows = anchored_statement(gateway, team.name, tmp_path / "statement.csv")
    charges = [row for row in rows if row["kind"] == "charge" and row["section"] == "entry"]
    assert [(row["request_id"], int(row["leaf"])) for row in charges] == [
        (receipt.request_id, receipt.leaf_index) for receipt in receipts
    ]
    anchor = rows[-2]  # then the end line
    checkpoint = open_checkpoint(anchor["note"].encode(), LOG.name, [LOG.verifier])
    assert checkpoint.size == int(anchor["count"]) > int(anchor["leaf"]) >= receipts[-1].leaf_index

    code, out = verify(gateway, tmp_path / "statement.csv")
    assert code == 0, out
    assert "Statement verified" in out
    assert f"Its {len(charges) + 1} entries, and its last event, are in the transparency log" in out  # + the top-up

    with plain_http.Client(
        base_url=gateway.root_url + "/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ) as admin:
        answer = admin.get(f"/teams/{team.name}/statements/{MONTH}", params={"format": "json", "chained": "true"})
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["log_checkpoint"]["note"] == anchor["note"]  # the same checkpoint: the first to hold it
    assert [entry["leaf"] for entry in document["entries"]] == [
        int(row["leaf"]) for row in rows if row["section"] == "entry"
    ]
    (tmp_path / "statement.json").write_text(answer.text)
    code, out = verify(gateway, tmp_path / "statement.json")
    assert code == 0, out

    exported = [
        json.loads(line)
        for line in gateway.cli("ledger", "export", "--team", team.name, "--format", "jsonl").stdout.splitlines()
    ]
    assert [(line["request_id"], line["leaf"]) for line in exported if line["kind"] == "charge"] == [
        (receipt.request_id, receipt.leaf_index) for receipt in receipts
    ]
    header = gateway.cli("ledger", "export", "--team", team.name).stdout.splitlines()[0]
    assert header.endswith(",reason,leaf")


def test_an_event_changed_in_the_database_fails_the_statements_proof_naming_its_row(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream, tmp_path: Path
):
    directory = tmp_path_factory.mktemp("changed")
    config = write_config(directory, fake_upstream.base_url)
    config.write_text(config.read_text() + "\n[transparency]\ncheckpoint_seconds = 0.2\n")
    gateway = Gateway(config, env={"TOLLGATE_LOG_KEY": LOG.key_string}).start()
    try:
        with contextmanager(teams_of)(config) as teams:
            team = teams.open("50")
            first = open_receipt(chat(gateway, team).headers["x-tollgate-receipt"], LOG.verifier)
            chat(gateway, team)
            anchored_statement(gateway, team.name, tmp_path / "statement.csv")
    finally:
        gateway.stop()
    code, out = verify(gateway, tmp_path / "statement.csv")
    assert code == 0, out
    _change_a_charge(config, _other_end_user)  # whom it is attributed to: no statement column shows it
    code, out = verify(gateway, tmp_path / "statement.csv")
    assert code == 1, out
    assert "charge at version" in out
    assert f"({first.request_id})" in out
    assert "it was changed after it was logged" in out


def test_bad_keys_and_checkpoints_given_to_verify_are_refused_saying_why(
    gateway: Gateway, teams: Teams, tmp_path: Path
):
    team = teams.open("50")
    chat(gateway, team)
    gateway.wait_until_nothing_held(team.name)
    anchored_statement(gateway, team.name, tmp_path / "statement.csv")
    statement = ["ledger", "verify", "--statement", str(tmp_path / "statement.csv")]

    not_a_key = gateway.cli(*statement, "--key", "not-a-key", check=False)
    assert not_a_key.returncode == 2
    assert "--key: not a log verifier key" in not_a_key.stderr

    (tmp_path / "garbage").write_bytes(b"\x00\xffnot a checkpoint\n" * 3)
    missing = tmp_path / "no-such-file"
    another_log = signer_from_seed("other.example.com/log", bytes(32))
    (tmp_path / "other").write_bytes(sign_checkpoint(Checkpoint(another_log.name, 1, bytes(32)), another_log))
    for kept, said in (
        (tmp_path / "garbage", "--checkpoint is not a checkpoint of gateway.example.com/ledger"),
        (tmp_path / "other", "--checkpoint is not a checkpoint of gateway.example.com/ledger"),
    ):
        refused = gateway.cli(*statement, "--key", LOG.verifier.key_string, "--checkpoint", str(kept), check=False)
        assert refused.returncode == 1, refused.stdout
        assert said in refused.stderr
    absent = gateway.cli(*statement, "--key", LOG.verifier.key_string, "--checkpoint", str(missing), check=False)
    assert absent.returncode == 2
    assert "--checkpoint: cannot read" in absent.stderr
    signed_by_another = gateway.cli(*statement, "--key", another_log.verifier.key_string, check=False)
    assert signed_by_another.returncode == 1
    assert "is not one of other.example.com/log's, signed by its key" in signed_by_another.stderr
