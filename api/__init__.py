"""The HTTP API: validates, records state and starts workflows by deterministic id."""
