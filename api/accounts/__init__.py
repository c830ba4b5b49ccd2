"""Accounts and their API keys."""
