"""The ledger's rules, prices and money, with no I/O."""

from domain.compiled import use_sources_where_needed

use_sources_where_needed()
