"""The local stack and its tools: embedded PostgreSQL, the Temporal dev server, an SMTP sink, seeding."""
