"""Where the ledger is stored: the event store, its two databases, and what is written with them.

The layer under everything of ``app/`` that reads or writes the ledger, and under ``projections/``;
it imports only ``domain/`` (and its libraries), never the rest of ``app/`` nor ``projections/``
(``app/store/ruff.toml``). Its modules:

- the event store: ``event_store.py`` (``LedgerStore``, the eventsourcing application), its two
  recorders ``sqlite_store.py`` and ``postgres_store.py``, and ``database.py`` (one ``database_url``,
  SQLite or PostgreSQL, and the plain connections the read models are written on);
- the read models written in the events' own transaction by the recorders: ``read_models.py`` (key
  directory, balances, once-only charges, Idempotency-Key answers) and ``admin_key_directory.py``;
- ``snapshots.py``: the team snapshots, a cache of a team's state that loads read first;
- ``store_errors.py``: why the store refused a transaction, told apart once;
- ``writer_lock.py``: the writers' turns on a team across the processes sharing a database;
- ``instances.py``: the registry of the gateway processes serving one database;
- ``probe.py``: whether the database can be written right now;
- ``request_records.py`` (each answered request's record) and ``housekeeping.py`` (purging what is kept
  only for a while);
- ``storable.py`` (what a database can store of a value) and ``many_rows.py`` (many rows in one
  statement): the SQL helpers both databases share;
- ``schema.py`` and ``migrations/``: the read models' tables, owned by alembic (``alembic.ini`` at the
  checkout's root names the migrations' folder).

The projections (``projections/``) are built on it: what is made of the events after they are
stored, in transactions of their own.
"""
