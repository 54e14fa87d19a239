"""The ledger's service layer: everything that reads or writes team ledgers for a running gateway.

The writer owns every write (one thread, batches, group commit); billing, leases, the hold sweeper,
the health probe, the projector and the read-side queries sit over it. The domain rules live in
``domain/``; the storage in ``app/store/``, the projections in ``projections/``; HTTP and the CLI use
this package, never the reverse.
"""
