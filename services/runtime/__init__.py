"""What the project's contract services share: the worker harness, their own database, the table deleter, the
per-deletion ledger and the pace of their deletes."""
