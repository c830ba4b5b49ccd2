"""The account export workflow."""
