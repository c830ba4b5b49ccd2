"""The deletion contract's conformance kit: `python -m lifecycle.deletion.conformance`, which a service's team runs
against its own running service to check from the outside the promises of `lifecycle.deletion.v1`
(proto/README.md, "Check your service").

- `transport.py`: how the kit reaches a service, the contract's three calls (today on a task queue, through the
  `ConformanceCall` workflow of `caller.py`); `wire.py`: the requests as the contract encodes them, and the answers
  read leniently; `calls.py`: the calls with messages in and out;
- `seeding.py`: how the team's own command gives a subject rows to delete; `subjects.py`: the subjects of a run;
- `checks.py`, `paced_checks.py`, `export_check.py`: the checks; `run.py`: all of them in order; `report.py`:
  their lines; `__main__.py`: the command.
"""
