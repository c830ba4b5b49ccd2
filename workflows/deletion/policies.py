"""The deletion workflows' own policies (rounds, attempts, backoffs), each with the reason it has its value.

Activity timeouts and retry policies are in workflows/activity_presets.py.
"""

from __future__ import annotations

from datetime import timedelta

# A service failing this many attempts in a row is a poison pill: alert and wait for an operator.
POISON_PILL_ATTEMPTS = 5

# Finishing found rows again (a writer raced the deleters): delete again this many times, then ask an operator.
FINISH_ROUNDS = 3

# A bot deletion of an account that closed without completing (cancelled, terminated, failed) is started
# again after this backoff (a durable timer), doubling up to the cap: an operator stopping it repeatedly is
# not fought in a tight loop, and the account deletion never fails for it.
CHILD_REDRIVE_BACKOFF = timedelta(seconds=5)
CHILD_REDRIVE_BACKOFF_CAP = timedelta(minutes=10)
