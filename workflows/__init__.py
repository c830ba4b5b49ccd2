"""Workflows: orchestration only, deterministic, reading as the business process."""
