"""The PostgreSQL schema and the async engine."""
