"""The read-model schema, owned by alembic (migrations in ``app/store/migrations``).

The eventsourcing library creates and owns its event tables; alembic creates and migrates only the
tables below, so ``alembic revision --autogenerate`` never proposes to drop the event store.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec.structs import fields
from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

from app.store.alert_rows import AlertRow
from app.store.entry_rows import EntryRow
from app.store.usage_rows import KEY_WIDTH, AttributionRow, UsageRow

metadata = MetaData()


def columns_of(record: type[msgspec.Struct], primary_key: tuple[str, ...]) -> list[Column[Any]]:
    """The columns of a table whose rows are ``record``s, in its fields' order: an ``int`` field a
    64-bit integer column, a ``str`` a text one, none NULL, a field's default the column's server
    default (what a row written before the column existed holds); ``primary_key``: the fields the
    table's primary key is made of."""
    kinds: dict[object, type[BigInteger] | type[String]] = {int: BigInteger, str: String}
    return [
        Column(
            f.name,
            kinds[f.type],
            primary_key=f.name in primary_key,
            nullable=False,
            server_default=None if f.default is msgspec.NODEFAULT else str(f.default),
        )
        for f in fields(record)
    ]


api_keys = Table(
    "api_keys",
    metadata,
    Column("key_hash", String, primary_key=True),
    Column("team_id", String, nullable=False),
    Column("team_name", String, nullable=False),
    Column("key_id", String, nullable=False),
    Column("revoked", Integer, nullable=False, server_default="0"),
    Column("models", String, nullable=False, server_default=""),
    Column("endpoints", String, nullable=False, server_default=""),
    Column("key_rpm", BigInteger, nullable=True),
    Column("key_tpm", BigInteger, nullable=True),
    Column("team_rpm", BigInteger, nullable=True),
    Column("team_tpm", BigInteger, nullable=True),
    Column("suspended", Integer, nullable=False, server_default="0"),
    Column("version", BigInteger, nullable=False, server_default="0"),
    Column("clamp_output", Integer, nullable=False, server_default="0"),
    Column("price_adjustments", String, nullable=False, server_default=""),
    Column("budgeted", Integer, nullable=False, server_default="0"),
)

#: The named admin keys (``domain/admin_keys.py``), by hash: what the admin API looks a presented key up in.
admin_keys = Table(
    "admin_keys",
    metadata,
    Column("key_hash", String, primary_key=True),
    Column("key_id", String, nullable=False, unique=True),
    Column("name", String, nullable=False),
    Column("role", String, nullable=False),
    Column("revoked", Integer, nullable=False, server_default="0"),
    Column("issued_at", String, nullable=False),
    Column("issued_by", String, nullable=False, server_default=""),
    Column("version", BigInteger, nullable=False),
)

team_balances = Table(
    "team_balances",
    metadata,
    Column("team_id", String, primary_key=True),
    Column("team_name", String, nullable=False, unique=True),
    Column("balance", BigInteger, nullable=False),
    Column("held", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    CheckConstraint("held >= 0 AND balance >= held", name="team_balances_available_not_negative"),
)

#: The audit history: its columns are the fields of the row the history projection makes of an
#: event (``app/store/entry_rows.py``), declared there once.
ledger_entries = Table(
    "ledger_entries",
    metadata,
    *columns_of(EntryRow, primary_key=("notification_id",)),
    Index("ledger_entries_team_time", "team_name", "occurred_at"),
    #: A team's entries in ledger order, a keyset page at a time (export, the dashboard's download).
    Index("ledger_entries_team_order", "team_name", "notification_id"),
    #: A request's charge by its id (``GET /admin/requests/{id}``), among millions of entries.
    Index("ledger_entries_request", "request_id"),
)

#: Usage by team × key × model × day: its columns are the fields of a charge's increment of it
#: (``app/store/usage_rows.py``), declared there once; the key is the first four.
usage_daily = Table("usage_daily", metadata, *columns_of(UsageRow, primary_key=UsageRow.__struct_fields__[:KEY_WIDTH]))

#: Charges by team × attribution × day: the dimension is ``user`` (the value: the end user) or
#: ``tag:<name>`` (the tag's value). Every charge has its ``user`` row (``""``: none named), so those
#: add up to the team's charges; a tag's ``""`` is the team's charges less its tagged ones.
#: Its columns are the fields of :class:`~app.store.usage_rows.AttributionRow`, declared there once.
usage_by_attribution = Table(
    "usage_by_attribution",
    metadata,
    *columns_of(AttributionRow, primary_key=AttributionRow.__struct_fields__[:KEY_WIDTH]),
    Index("usage_by_attribution_day", "team_name", "day", "dimension"),
)

#: Charges by team × endpoint × day (``projections/endpoint_usage.py``): the dashboard's usage by
#: endpoint reads days × endpoints rows of it, never the team's charges one by one.
usage_by_endpoint = Table(
    "usage_by_endpoint",
    metadata,
    Column("team_name", String, primary_key=True),
    Column("endpoint", String, primary_key=True),
    Column("day", String, primary_key=True),
    Column("requests", BigInteger, nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cache_write_tokens", BigInteger, nullable=False),
    Column("cache_hit_tokens", BigInteger, nullable=False),
    Column("cost", BigInteger, nullable=False),
)

projection_tracking = Table(
    "projection_tracking",
    metadata,
    Column("name", String, primary_key=True),
    Column("notification_id", BigInteger, nullable=False),
)

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("team_id", String, primary_key=True),
    Column("idem_key", String, primary_key=True),
    Column("body_hash", String, nullable=False),
    Column("request_id", String, nullable=False),
    Column("content_type", String, nullable=False),
    Column("response", LargeBinary, nullable=False),
    Column("created_at", String, nullable=False),
    #: Unix time after which the key no longer replays this answer (a retry is a new request), and
    #: the row may be purged (``app/store/housekeeping.py``).
    Column("expires_at", Float, nullable=False, server_default="0"),
    Index("idempotency_keys_expiry", "expires_at"),
)


#: Every charged request, one row each, written in the transaction of its ``Charged`` event: the
#: store itself refuses to charge a request id twice, whatever path the second charge took (a late
#: charge after its hold expired, an owed charge paid after an outage, an abandoned stream charged by
#: another process). The charge's figures answer a duplicate with what was really charged.
charged_requests = Table(
    "charged_requests",
    metadata,
    Column("team_id", String, primary_key=True),
    Column("request_id", String, primary_key=True),
    Column("version", BigInteger, nullable=False),
    Column("charged", BigInteger, nullable=False),
    Column("balance_after", BigInteger, nullable=False),
)


#: What each gateway process's streams in flight had delivered at its last heartbeat: if the
#: process dies, whoever releases its holds charges these streams for that much (a lower bound of
#: what their clients received), instead of nothing.
inflight_streams = Table(
    "inflight_streams",
    metadata,
    Column("instance_id", String, primary_key=True),
    Column("request_id", String, primary_key=True),
    Column("team_id", String, nullable=False),
    Column("team_name", String, nullable=False),
    Column("key_id", String, nullable=False),
    Column("model", String, nullable=False),
    Column("endpoint", String, nullable=False),
    Column("lease", String, nullable=False, server_default=""),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cache_write_tokens", BigInteger, nullable=False),
    Column("cache_hit_tokens", BigInteger, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("tags", String, nullable=False, server_default=""),
    Column("end_user", String, nullable=False, server_default=""),
    # the serving deployment's price key ("": the model's price), which a dead process's stream is charged at
    Column("price_key", String, nullable=False, server_default=""),
)


#: Gateway processes serving this database, each refreshing ``last_seen`` every few seconds: how a
#: process learns it is not alone (rate limits kept in memory would then not hold across processes).
gateway_instances = Table(
    "gateway_instances",
    metadata,
    Column("instance_id", String, primary_key=True),
    Column("host", String, nullable=False),
    Column("pid", BigInteger, nullable=False),
    Column("shared_limits", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
)


#: A team's state every ``snapshot_every`` events (``app/store/snapshots.py``): a cache, never the
#: truth. ``occurred_at_us`` is when its last event happened (microseconds since the Unix epoch), for
#: reading a team as it was at an instant; ``digest`` guards the state against corruption.
team_snapshots = Table(
    "team_snapshots",
    metadata,
    Column("team_id", String, primary_key=True),
    Column("version", BigInteger, primary_key=True),
    Column("occurred_at_us", BigInteger, nullable=False),
    Column("topic", String, nullable=False),
    Column("state", LargeBinary, nullable=False),
    Column("digest", String, nullable=False),
    Index("team_snapshots_team_time", "team_id", "occurred_at_us"),
)


#: Each answered request as its gateway process saw it (``app/observability/record_writer.py``):
#: status, timings, the deployment that answered and after how many attempts. Written in batches off
#: the request path and kept ``request_record_days``; read by ``GET /v1/requests/{id}`` from any
#: process. Telemetry, not money: the ledger's ``Charged`` event is the charge's truth.
request_records = Table(
    "request_records",
    metadata,
    Column("request_id", String, primary_key=True),
    Column("team_name", String, nullable=False),
    Column("key_id", String, nullable=False),
    Column("model", String, nullable=False),
    Column("endpoint", String, nullable=False),
    Column("method", String, nullable=False),
    Column("path", String, nullable=False),
    Column("status", Integer, nullable=False),
    Column("streamed", Integer, nullable=False),
    #: Unix time the request arrived.
    Column("started_at", Float, nullable=False),
    #: Milliseconds to the answer's first byte (NULL: none was sent), and to its last.
    Column("first_byte_ms", Float, nullable=True),
    Column("duration_ms", Float, nullable=False),
    Column("deployment", Integer, nullable=True),
    Column("upstream_model", String, nullable=False, server_default=""),
    Column("attempts", Integer, nullable=False),
    Column("upstream_errors", String, nullable=False, server_default=""),
    Column("error", String, nullable=True),
    #: Micro-credits the gateway charged (NULL: not charged).
    Column("charged", BigInteger, nullable=True),
    Index("request_records_started", "started_at"),
)


#: The files a team uploaded (``/v1/files``) and the output files of its batches (``app/store/batch_store.py``):
#: an upload's bytes are in ``gateway_file_chunks``; an output file's are the upstream's (``upstream_file_id``).
gateway_files = Table(
    "gateway_files",
    metadata,
    Column("file_id", String, primary_key=True),
    Column("team_name", String, nullable=False),
    Column("purpose", String, nullable=False),
    Column("filename", String, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    #: ``uploading`` until its last chunk is stored, then ``processed``; ``deleted`` once deleted.
    Column("status", String, nullable=False),
    Column("batch_id", String, nullable=False, server_default=""),
    Column("upstream_file_id", String, nullable=False, server_default=""),
    Index("gateway_files_team", "team_name", "created_at"),
)

#: An upload's bytes, in chunks of at most a MiB, in order (``seq``).
gateway_file_chunks = Table(
    "gateway_file_chunks",
    metadata,
    Column("file_id", String, primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("data", LargeBinary, nullable=False),
)

#: Each batch (``/v1/batches``, ``/v1/messages/batches``): where it runs upstream, the last state the
#: upstream reported, which gateway process polls it (``poller`` until ``poll_until``, Unix time),
#: and whether its lines are charged and its hold released (``settled``). Its money is the ledger's.
gateway_batches = Table(
    "gateway_batches",
    metadata,
    Column("batch_id", String, primary_key=True),
    Column("team_name", String, nullable=False),
    Column("key_id", String, nullable=False),
    Column("model", String, nullable=False),
    #: ``openai`` (the Batch API) or ``anthropic`` (message batches).
    Column("api", String, nullable=False),
    Column("endpoint", String, nullable=False),
    Column("input_file_id", String, nullable=False),
    Column("deployment", Integer, nullable=False),
    Column("upstream_batch_id", String, nullable=False, server_default=""),
    Column("status", String, nullable=False),
    Column("hold", BigInteger, nullable=False),
    Column("lines", BigInteger, nullable=False),
    #: The batch's attribution (JSON: ``{"tags": {...}, "end_user": ...}``) and the client's metadata (JSON).
    Column("attribution", String, nullable=False),
    Column("metadata", String, nullable=False),
    #: The upstream's batch object as last read (JSON).
    Column("upstream", String, nullable=False, server_default="{}"),
    Column("created_at", BigInteger, nullable=False),
    Column("settled", Integer, nullable=False, server_default="0"),
    Column("charged", BigInteger, nullable=False, server_default="0"),
    Column("poller", String, nullable=False, server_default=""),
    Column("poll_until", Float, nullable=False, server_default="0"),
    Index("gateway_batches_team", "team_name", "created_at"),
    Index("gateway_batches_open", "settled"),
)


#: One row: a random id made when the database was, naming this ledger's state kept elsewhere (Redis).
ledger_identity = Table("ledger_identity", metadata, Column("id", String, primary_key=True))


#: The alert outbox (``projections/alerts.py``): each alert the events recorded, and its deliveries.
#: Its columns are the fields of :class:`~app.store.alert_rows.AlertRow`, declared there once.
alerts = Table(
    "alerts",
    metadata,
    *columns_of(AlertRow, primary_key=("alert_id",)),
    Index("alerts_team", "team_name", "notification_id"),
    Index("alerts_order", "notification_id"),
)

alert_deliveries = Table(
    "alert_deliveries",
    metadata,
    Column("alert_id", String, primary_key=True),
    Column("url", String, primary_key=True),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("next_attempt_at", Float, nullable=False, server_default="0"),
    Column("delivered_at", String, nullable=True),
    Column("last_error", String, nullable=False, server_default=""),
)


#: The auto-recharge outbox (``projections/recharges.py``): each attempt the events began, and
#: what became of its payment.
recharge_attempts = Table(
    "recharge_attempts",
    metadata,
    Column("attempt", String, primary_key=True),
    Column("notification_id", BigInteger, nullable=False),
    Column("team_name", String, nullable=False),
    Column("amount", BigInteger, nullable=False),
    Column("occurred_at", String, nullable=False),
    Column("tries", Integer, nullable=False, server_default="0"),
    Column("next_try_at", Float, nullable=False, server_default="0"),
    Column("settled_at", String, nullable=True),
    Column("outcome", String, nullable=False, server_default=""),
    Column("payment_intent", String, nullable=False, server_default=""),
    Column("last_error", String, nullable=False, server_default=""),
    Index("recharge_attempts_team", "team_name", "notification_id"),
    Index("recharge_attempts_order", "notification_id"),
)


#: The transparency log (``app/store/log_append.py``): its size and root (one row), its tiles, which
#: event each leaf is, and the checkpoints signed and their witnesses' cosignatures (``app/store/log_reads.py``).
log_state = Table(
    "log_state",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("root", LargeBinary, nullable=False),
)

log_tiles = Table(
    "log_tiles",
    metadata,
    Column("level", Integer, primary_key=True),
    Column("tile_index", BigInteger, primary_key=True),
    Column("hashes", LargeBinary, nullable=False),
)

log_leaves = Table(
    "log_leaves",
    metadata,
    Column("leaf_index", BigInteger, primary_key=True),
    Column("originator_id", String, nullable=False),
    Column("originator_version", BigInteger, nullable=False),
    Index("log_leaves_event", "originator_id", "originator_version", unique=True),
)

log_checkpoints = Table(
    "log_checkpoints",
    metadata,
    Column("size", BigInteger, primary_key=True),
    Column("root", LargeBinary, nullable=False),
    Column("note", Text, nullable=False),
    Column("signed_at", String, nullable=False),
)

log_cosignatures = Table(
    "log_cosignatures",
    metadata,
    Column("size", BigInteger, primary_key=True),
    Column("witness", String, primary_key=True),
    Column("line", Text, nullable=False),
    Column("cosigned_at", BigInteger, nullable=False),
)


#: Events a projection could not project, skipped so that the events after them are
#: (``projections/quarantine.py``): reported by health, metrics and ``ledger verify``.
projection_quarantine = Table(
    "projection_quarantine",
    metadata,
    Column("name", String, primary_key=True),
    Column("notification_id", BigInteger, primary_key=True),
    Column("topic", String, nullable=False),
    Column("error", String, nullable=False),
    Column("quarantined_at", String, nullable=False),
)


#: The last ``GET /admin/ledger/verify`` run on this ledger, one row (``app/store/verify_lock.py``): a
#: caller of any gateway process that waited for a run begun after it asked takes that run's report.
ledger_verify_runs = Table(
    "ledger_verify_runs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run", BigInteger, nullable=False),  # how many runs have finished on this ledger
    Column("position", BigInteger, nullable=False),  # the last event in the ledger when the run began
    Column("started_at", String, nullable=False),
    Column("finished_at", String, nullable=False),
    Column("report", Text, nullable=False),  # the report, JSON
)


READ_MODEL_TABLES = frozenset(metadata.tables)


def upgrade_read_models(sqlalchemy_url: str) -> None:
    """Bring the read-model tables to the newest migration."""
    from alembic import command
    from alembic.config import Config

    from app.store.migrations import MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["url"] = sqlalchemy_url
    command.upgrade(config, "head")
