"""Deleting bots and accounts: what the API, the workflows and the activities share."""
