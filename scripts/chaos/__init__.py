"""The chaos suite: ``python -m scripts.chaos`` (docs/chaos.md).

clusters (its own PostgreSQL and Redis), gateways (the processes it runs and kills), teams (the
teams, and the operator's commands), traffic and load (what is sent, and how), client (one attempt,
recorded), faults (the schedule), ledger (what was recorded), answers, charges and invariants (the
checks), verdict (violations and the summary line), logs (the gateways' errors), run (one run).
"""
