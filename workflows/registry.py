"""Every workflow the worker runs."""

WORKFLOWS: list[type] = []
