"""The deletion contract's conformance kit: `python -m lifecycle.deletion.conformance`, which a service's team runs
against its own running service to check from the outside the promises of `lifecycle.deletion.v1`
(proto/README.md, "Check your service").

- `transport.py`: how the kit reaches a service (the contract's three calls); today a task queue;
- `wire.py`: the requests as the contract encodes them, and the answers read leniently;
- `seeding.py`: how the kit has the service's team's own command give a subject rows to delete;
- `checks.py`, `export_check.py`: the checks; `report.py`: their lines; `__main__.py`: the command.
"""
