"""Credit a team buys itself: Stripe Checkout and Stripe's webhooks, on the team's ledger."""
