"""Bots: create, list, read, and delete in the background."""
