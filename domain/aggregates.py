"""The aggregates that are not a team's, in one place.

Every reader of the whole notification log (the audit history projection, its rebuild and check,
``ledger verify``, the list of recently active teams) replays the team ledgers and treats these
apart: the price list and the admin keys have no team, no balance and no history rows.
"""

from __future__ import annotations

from uuid import UUID

from domain.admin_keys import ADMIN_KEYS_ID
from domain.prices import PRICE_LIST_ID

#: The ids of the aggregates that are not a team's ledger.
NON_TEAM_IDS: frozenset[UUID] = frozenset({PRICE_LIST_ID, ADMIN_KEYS_ID})
