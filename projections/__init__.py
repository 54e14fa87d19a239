"""The projections: what is made of the stored events after the fact, in transactions of their own.

Each is fed by the event store's notification log (``app/store/event_store.py``) or by replaying a
team's events, and can be rebuilt from them. It imports ``app.store`` and ``domain/`` only, nothing
else of ``app/`` (``projections/ruff.toml``). Its modules:

- the audit history and usage projection: ``history.py`` (catch-up, rebuild, the read side),
  ``history_rows.py`` (the rows an event makes), ``operator_rows.py`` (the rows of an operator's
  actions that move no money), ``attribution.py`` (usage by tag and end user), ``alerts.py`` (the
  alert outbox, filled by the history projection) and ``quarantine.py`` (events it could not project,
  set aside);
- ``replay.py``: every team as its events make it, which rebuilding and auditing both start from;
- ``audit.py`` (``ledger verify``) with ``audit_history.py`` and ``audit_snapshots.py``: the
  projections, the read models and the snapshots checked against the replay;
- ``rerate.py``: a period's charges priced again at another price list;
- ``statements.py`` and ``statement_chain.py``: a team's monthly statement, built from its events, and
  its hash chain.

What is written in the events' own transaction (the key directory, the balances, the admin key
directory) is the store's (``app/store/``), as are the snapshots, the writer lock, the process
registry and the migrations.
"""
