"""The transparency log through a real gateway, as a customer, an auditor and a witness use it: a
charge's receipt verifies offline against a later checkpoint and its inclusion proof (and one changed
digit does not); checkpoints stay consistent and ``tollgate log audit`` says so; a witness cosigns and
the gateway serves the cosignature; bad proof requests are refused in the JSON error shape; and an
event changed in the database is caught by ``ledger verify``."""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from domain.transparency.checkpoint import open_checkpoint
from domain.transparency.cosignature import Cosigner, cosignatures_of
from domain.transparency.keys import signer_from_seed
from domain.transparency.note import decode_base64
from domain.transparency.receipt import open_receipt, verify_receipt
from domain.transparency.verify import verify_consistency
from tests.support import plain_http
from tests.support.cli_fork import run_tollgate
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import GATEWAY_ENV, Gateway, verified_gateway, write_config
from tests.support.teams import Team, Teams, teams_of

LOG = signer_from_seed("gateway.example.com/ledger", bytes(range(32)))
WITNESS = Cosigner("witness.example.com/w1", secrets.token_bytes(32))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    directory = tmp_path_factory.mktemp("tlog")
    config = write_config(directory, fake_upstream.base_url)
    config.write_text(
        config.read_text()
        + f'\n[transparency]\ncheckpoint_seconds = 0.2\nwitnesses = ["{WITNESS.verifier.key_string}"]\n'
    )
    yield from verified_gateway(config, {"TOLLGATE_LOG_KEY": LOG.key_string})


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def chat(gateway: Gateway, team: Team) -> httpx.Response:
    body = {"model": "fake-gpt", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}
    answer = plain_http.post(
        f"{gateway.base_url}/chat/completions", json=body, headers={"Authorization": f"Bearer {team.key}"}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    return answer


def checkpoint_reaching(gateway: Gateway, size: int, within: float = 10.0) -> bytes:
    """The latest checkpoint, once it has at least ``size`` leaves."""
    deadline = time.monotonic() + within
    while True:
        answer = plain_http.get(f"{gateway.root_url}/ledger/checkpoint", timeout=10)
        if answer.status_code == 200 and open_checkpoint(answer.content, LOG.name, [LOG.verifier]).size >= size:
            return answer.content
        assert time.monotonic() < deadline, f"no checkpoint of {size} leaves within {within} s: {answer.text}"
        time.sleep(0.1)


def proof(gateway: Gateway, path: str, **params: int) -> dict[str, Any]:
    answer = plain_http.get(f"{gateway.root_url}/ledger/proof/{path}", params=params, timeout=10)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def tollgate(*args: str) -> tuple[int, str]:
    result = run_tollgate(list(args), {**os.environ, **GATEWAY_ENV}, timeout=60)
    return result.returncode, result.stdout + result.stderr


MONTH = datetime.now(UTC).strftime("%Y-%m")


def anchored_statement(gateway: Gateway, team: str, path: Path, within: float = 10.0) -> list[dict[str, str]]:
    """The team's chained CSV statement written to ``path`` by the CLI, once a checkpoint holds its
    last event (the gateway signs one every 0.2 s here); its rows."""
    deadline = time.monotonic() + within
    while True:
        gateway.cli("ledger", "statement", "--team", team, "--month", MONTH, "--format", "csv", "--chained",
                    "--output", str(path))  # fmt: skip
        rows = list(csv.DictReader(io.StringIO(path.read_text())))
        anchor = next(row for row in rows if row["section"] == "log_checkpoint")
        if anchor["count"]:
            return rows
        assert time.monotonic() < deadline, f"no checkpoint held the statement's last event: {anchor['note']}"
        time.sleep(0.2)


def verify_statement(gateway: Gateway, path: Path, *more: str) -> tuple[int, str]:
    done = gateway.cli(
        "ledger", "verify", "--statement", str(path), "--key", LOG.verifier.key_string, *more, check=False
    )
    return done.returncode, done.stdout + done.stderr


def test_a_charges_receipt_verifies_offline_with_a_later_checkpoint_and_a_changed_digit_does_not(
    gateway: Gateway, teams: Teams, tmp_path: Path
):
    team = teams.open("50")
    answer = chat(gateway, team)
    header = answer.headers["x-tollgate-receipt"]
    assert answer.json()["usage"]["receipt"] == header
    receipt = open_receipt(header, LOG.verifier)
    assert (receipt.team, receipt.request_id) == (team.name, answer.headers["x-request-id"])
    assert receipt.cost == round(float(answer.json()["usage"]["cost"]["credits"]) * 1_000_000)
    note = checkpoint_reaching(gateway, receipt.leaf_index + 1)
    size = open_checkpoint(note, LOG.name, [LOG.verifier]).size
    found = proof(gateway, "inclusion", leaf=receipt.leaf_index, size=size)
    assert decode_base64(found["leaf_hash"]) == receipt.leaf_hash
    hashes = [decode_base64(h) for h in found["proof"]]
    assert verify_receipt(header, note, hashes, LOG.verifier).receipt == receipt
    looked_up = plain_http.get(
        f"{gateway.base_url}/requests/{receipt.request_id}", headers={"Authorization": f"Bearer {team.key}"}, timeout=10
    ).json()["data"]["log"]
    assert looked_up["leaf_index"] == receipt.leaf_index
    in_log = [decode_base64(h) for h in looked_up["proof"]]
    verify_receipt(header, looked_up["checkpoint"].encode(), in_log, LOG.verifier)
    (tmp_path / "receipt").write_text(header)
    (tmp_path / "checkpoint").write_bytes(note)
    (tmp_path / "proof.json").write_text(json.dumps(found))
    key = plain_http.get(f"{gateway.root_url}/ledger/key", timeout=10).text.strip()
    assert key == LOG.verifier.key_string
    args = ["--checkpoint", str(tmp_path / "checkpoint"), "--proof", str(tmp_path / "proof.json"), "--key", key]
    code, out = tollgate("log", "verify-receipt", str(tmp_path / "receipt"), *args)
    assert code == 0, out
    raw = base64.b64decode(header)
    changed = base64.b64encode(raw.replace(f"cost {receipt.cost}".encode(), f"cost {receipt.cost + 1}".encode()))
    code, out = tollgate("log", "verify-receipt", changed.decode(), *args)
    assert code == 1
    assert "NOT VERIFIED" in out


def test_an_answer_under_an_idempotency_key_carries_its_receipt_in_its_head_and_replays_byte_for_byte(
    gateway: Gateway, teams: Teams
):
    """Its body is stored in the charge's own transaction, before the charge has its leaf: the
    receipt is in the head; the replay is the stored answer, byte for byte, charged nothing more."""
    team = teams.open("50")
    body = {"model": "fake-gpt", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}
    headers = {"Authorization": f"Bearer {team.key}", "Idempotency-Key": secrets.token_hex(8)}
    first = plain_http.post(f"{gateway.base_url}/chat/completions", json=body, headers=headers, timeout=30)
    assert first.status_code == 200, first.text
    assert open_receipt(first.headers["x-tollgate-receipt"], LOG.verifier).request_id == first.headers["x-request-id"]
    again = plain_http.post(f"{gateway.base_url}/chat/completions", json=body, headers=headers, timeout=30)
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["x-request-id"] == first.headers["x-request-id"]
    assert again.content == first.content


def test_checkpoints_stay_consistent_an_audit_passes_and_a_witness_cosigns(
    gateway: Gateway, teams: Teams, tmp_path: Path
):
    team = teams.open("50")
    receipts = [chat(gateway, team).headers["x-tollgate-receipt"] for _ in range(3)]
    first = open_checkpoint(checkpoint_reaching(gateway, 1), LOG.name, [LOG.verifier])
    later_receipts = [chat(gateway, team).headers["x-tollgate-receipt"] for _ in range(3)]
    last_leaf = open_receipt(later_receipts[-1], LOG.verifier).leaf_index
    second = open_checkpoint(checkpoint_reaching(gateway, last_leaf + 1), LOG.name, [LOG.verifier])
    hashes = [
        decode_base64(h) for h in proof(gateway, "consistency", **{"from": first.size, "to": second.size})["proof"]
    ]
    verify_consistency(first.size, second.size, first.root_hash, second.root_hash, hashes)
    kept = plain_http.get(f"{gateway.root_url}/ledger/checkpoints", params={"after": 0}, timeout=10).json()[
        "checkpoints"
    ]
    assert [open_checkpoint(n.encode(), LOG.name, [LOG.verifier]).size for n in kept] == sorted(
        {open_checkpoint(n.encode(), LOG.name, [LOG.verifier]).size for n in kept}
    )
    (tmp_path / "receipts").write_text("\n".join(receipts + later_receipts) + "\n")
    state = str(tmp_path / "audit.json")
    for _ in range(2):  # the first run saves what it saw; the second proves the log extends it
        code, out = tollgate("log", "audit", "--url", gateway.root_url, "--key", LOG.verifier.key_string,
                             "--state", state, "--receipts", str(tmp_path / "receipts"))  # fmt: skip
        assert code == 0, out
        assert "6 receipt(s) proven" in out
        chat(gateway, team)
        checkpoint_reaching(gateway, second.size + 1)
    (tmp_path / "witness.key").write_text(WITNESS.key_string)
    code, out = tollgate("log", "witness", "--url", gateway.root_url, "--log-key", LOG.verifier.key_string,
                         "--key", str(tmp_path / "witness.key"), "--state", str(tmp_path / "w.json"))  # fmt: skip
    assert code == 0, out
    served = plain_http.get(f"{gateway.root_url}/ledger/checkpoint", timeout=10).content
    cosigned = cosignatures_of(served, [WITNESS.verifier])
    if not cosigned:  # a newer checkpoint was signed meanwhile: the cosigned one is kept all the same
        witnessed = open_checkpoint(served, LOG.name, [LOG.verifier])
        assert witnessed.size > second.size
    else:
        assert cosigned[0].name == WITNESS.name


@pytest.mark.parametrize(
    ("path", "params", "status"),
    [
        ("inclusion", {"leaf": "-1", "size": "3"}, 400),
        ("inclusion", {"leaf": "a", "size": "3"}, 400),
        ("inclusion", {"leaf": "3", "size": "3"}, 400),
        ("inclusion", {"leaf": "0", "size": "99999999999"}, 404),
        ("inclusion", {"leaf": "0", "size": "9" * 40}, 400),
        ("inclusion", {"leaf": "0", "size": "9" * 19}, 400),  # beyond 2^63 - 1
        ("inclusion", {"size": "3"}, 400),
        ("consistency", {"from": "5", "to": "3"}, 400),
        ("consistency", {"from": "0", "to": "99999999999"}, 404),
        ("consistency", {"from": "\x00", "to": "3"}, 400),
    ],
)
def test_bad_proof_requests_are_refused_in_the_json_error_shape(
    gateway: Gateway, path: str, params: dict[str, str], status: int
):
    answer = plain_http.get(f"{gateway.root_url}/ledger/proof/{path}", params=params, timeout=10)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["message"]


def test_checkpoints_after_a_size_no_log_can_have_is_refused_in_the_json_error_shape(gateway: Gateway):
    answer = plain_http.get(f"{gateway.root_url}/ledger/checkpoints", params={"after": "9" * 19}, timeout=10)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == "after"
    assert plain_http.get(f"{gateway.root_url}/ledger/checkpoints", params={"after": str((1 << 63) - 1)}).json() == {
        "checkpoints": []
    }


def test_a_cosignature_not_by_a_configured_witness_or_not_of_a_kept_checkpoint_is_refused(gateway: Gateway):
    served = checkpoint_reaching(gateway, 1)
    text, signatures = served.decode().rsplit("\n\n", 1)
    text += "\n"
    # the log's own signature alone: the checkpoint served may carry the configured witness's already
    note = (text + "\n" + "".join(f"{s}\n" for s in signatures.splitlines() if s.startswith(f"— {LOG.name} "))).encode()
    stranger = Cosigner("stranger.example/w9", bytes(32))
    for body, status in (
        (note + stranger.cosign(text, int(time.time())).line.encode(), 400),
        (b"not a note", 400),
        (b"x" * 20_000, 400),
        (note.replace(b"\n", b"\n", 1).replace(text.split("\n")[1].encode(), b"1", 1), 400),
    ):
        answer = plain_http.post(f"{gateway.root_url}/ledger/cosignatures", content=body, timeout=10)
        assert answer.status_code in (status, 404), (body[:60], answer.status_code, answer.text)
        assert answer.json()["error"]["message"]


def test_an_event_changed_in_the_database_is_caught_by_ledger_verify(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream
):
    directory = tmp_path_factory.mktemp("tampered")
    config = write_config(directory, fake_upstream.base_url)
    gateway = Gateway(config).start()
    try:
        with contextmanager(teams_of)(config) as teams:
            team = teams.open("50")
            chat(gateway, team)
    finally:
        gateway.stop()
    assert gateway.cli("ledger", "verify").returncode == 0
    _change_a_charge(config)
    verify = gateway.cli("ledger", "verify", check=False)
    assert verify.returncode == 1
    assert "changed after it was logged" in verify.stderr


def _change_a_charge(config: Path, change: Any = None) -> None:
    """A charge rewritten in the events table (its cost lowered, unless ``change`` says otherwise), as
    whoever can write the database could."""
    change = change or _cheaper
    url = next(line.split('"')[1] for line in config.read_text().splitlines() if line.startswith("database_url"))
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        path = path if path.is_absolute() else config.parent / path
        with sqlite3.connect(path) as db:
            rowid, state = db.execute(
                "SELECT rowid, state FROM stored_events WHERE topic LIKE '%Charged' LIMIT 1"
            ).fetchone()
            db.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", (change(bytes(state)), rowid))
        return
    with psycopg.connect(url) as db:
        nid, state = db.execute(
            "SELECT notification_id, state FROM ledger_events WHERE topic LIKE '%Charged' LIMIT 1"
        ).fetchone()
        db.execute("UPDATE ledger_events SET state = %s WHERE notification_id = %s", (change(bytes(state)), nid))


def _cheaper(state: bytes) -> bytes:
    record = json.loads(state)
    record["charged"] = max(0, record["charged"] - 1)
    return json.dumps(record, separators=(",", ":")).encode()


def test_history_rewritten_with_the_log_rebuilt_and_resigned_fails_the_auditors_next_audit(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream, tmp_path: Path
):
    """Whoever can write the database rewrites a charge, rebuilds the log from the rewritten events
    and lets the gateway sign new checkpoints: every check inside the ledger passes again, but the
    auditor's saved checkpoint is not in the new log, and its next audit says so."""
    from tests.support.backend import RawDatabase

    directory = tmp_path_factory.mktemp("rewritten")
    config = write_config(directory, fake_upstream.base_url)
    config.write_text(config.read_text() + "\n[transparency]\ncheckpoint_seconds = 0.2\n")
    env = {"TOLLGATE_LOG_KEY": LOG.key_string}
    audit = ["log", "audit", "--key", LOG.verifier.key_string, "--state", str(tmp_path / "audit.json")]
    gateway = Gateway(config, env=env).start()
    try:
        with contextmanager(teams_of)(config) as teams:
            team = teams.open("50")
            for _ in range(4):
                chat(gateway, team)
        checkpoint_reaching(gateway, 10)
        code, out = tollgate(*audit, "--url", gateway.root_url)
        assert code == 0, out
        anchored_statement(gateway, team.name, tmp_path / "before.csv")  # what the customer keeps
        (tmp_path / "kept").write_text(gateway.cli("log", "checkpoint").stdout)  # and an auditor
    finally:
        gateway.stop()
    _change_a_charge(config, _other_end_user)  # whom a charge is attributed to: nothing derived disagrees
    raw = RawDatabase.of_config(config)
    raw.relog()  # the log rebuilt from the rewritten events, every kept checkpoint dropped
    gateway.cli("ledger", "rebuild")  # and every projection and snapshot made again from them
    verified = gateway.cli("ledger", "verify", check=False)
    assert verified.returncode == 0, verified.stderr  # the ledger is consistent with itself again
    gateway = Gateway(config, env=env).start()  # signs the rewritten log's checkpoints
    try:
        checkpoint_reaching(gateway, 10)
        code, out = tollgate(*audit, "--url", gateway.root_url)
        assert code == 1
        assert "AUDIT FAILED" in out
        assert "is not consistent with the checkpoint of" in out or "a fork" in out
        anchored_statement(gateway, team.name, tmp_path / "after.csv")  # regenerated from the rewritten history
    finally:
        gateway.stop()
    code, out = verify_statement(gateway, tmp_path / "before.csv")
    assert code == 1, out  # the statement the customer holds names a tree the log no longer has
    code, out = verify_statement(gateway, tmp_path / "after.csv")
    assert code == 0, out  # consistent with itself: every check inside the ledger passes
    code, out = verify_statement(gateway, tmp_path / "after.csv", "--checkpoint", str(tmp_path / "kept"))
    assert code == 1, out
    assert "is not consistent with your checkpoint" in out


def _other_end_user(state: bytes) -> bytes:
    record = json.loads(state)
    record["end_user"] = "someone-else"
    return json.dumps(record, separators=(",", ":")).encode()


def test_keygen_writes_a_secret_key_once_serve_refuses_to_start_without_it_and_log_checkpoint_prints_it(
    gateway: Gateway, tmp_path: Path, fake_upstream: FakeUpstream
):
    out = tmp_path / "log.key"
    code, said = tollgate("log", "keygen", "gateway.example.com/other", "--out", str(out))
    assert code == 0, said
    assert out.stat().st_mode & 0o777 == 0o600
    assert out.read_text().startswith("PRIVATE+KEY+gateway.example.com/other+")
    assert said.strip().splitlines()[-1].startswith("gateway.example.com/other+")  # the verifier key to publish
    code, said = tollgate("log", "keygen", "gateway.example.com/other", "--out", str(out))
    assert code != 0
    assert "never overwritten" in said
    config = write_config(tmp_path, fake_upstream.base_url)
    config.write_text(config.read_text() + '\n[transparency]\nkey_env = "NO_SUCH_LOG_KEY"\n')
    code, said = tollgate("serve", "--config", str(config), "--port", "1")
    assert code == 2
    assert "environment variable NO_SUCH_LOG_KEY is not set" in said
    printed = gateway.cli("log", "checkpoint").stdout
    assert open_checkpoint(printed.encode(), LOG.name, [LOG.verifier]).size >= 1


def test_a_streamed_answers_receipt_is_in_its_final_usage_and_verifies(gateway: Gateway, teams: Teams):
    team = teams.open("50")
    body = {
        "model": "fake-gpt",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 16,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with plain_http.stream(
        "POST",
        f"{gateway.base_url}/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {team.key}"},
        timeout=30,
    ) as answer:
        assert answer.status_code == 200
        assert "x-tollgate-receipt" not in answer.headers  # the head went out before the charge
        chunks = [json.loads(line[6:]) for line in answer.iter_lines() if line.startswith("data: {")]
    usage = next(chunk["usage"] for chunk in reversed(chunks) if chunk.get("usage"))
    receipt = open_receipt(usage["receipt"], LOG.verifier)
    assert receipt.team == team.name
    note = checkpoint_reaching(gateway, receipt.leaf_index + 1)
    size = open_checkpoint(note, LOG.name, [LOG.verifier]).size
    hashes = [decode_base64(h) for h in proof(gateway, "inclusion", leaf=receipt.leaf_index, size=size)["proof"]]
    assert verify_receipt(usage["receipt"], note, hashes, LOG.verifier).receipt == receipt
