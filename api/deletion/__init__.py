"""Deleting bots and accounts: requests, status, the shared budget, receipts, the grace period."""
