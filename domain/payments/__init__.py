"""Money coming in from a payment provider, read without I/O (issue #31).

- :mod:`domain.payments.stripe_events`: a verified Stripe event (the dict the ``stripe`` library
  parsed) as one typed, frozen record of what it means to Tollgate: a payment succeeded or failed, a
  charge was refunded, a dispute opened or closed, or nothing Tollgate acts on;
- :mod:`domain.payments.amounts`: an amount in a currency's minor units as micro-credits, by one exact
  rule.

Crediting the ledger (once per PaymentIntent), taking credit back and auto-recharge are the ledger's:
this package only says what an event is.
"""
