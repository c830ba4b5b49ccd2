"""`python -m services.integrations`: the integrations service's worker (services/runtime/worker.py)."""

from services.integrations import INTEGRATIONS
from services.runtime.worker import main

if __name__ == "__main__":
    main(INTEGRATIONS)
