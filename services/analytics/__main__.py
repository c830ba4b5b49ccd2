"""`python -m services.analytics`: the analytics service's worker (services/runtime/worker.py)."""

from services.analytics import ANALYTICS
from services.runtime.worker import main

if __name__ == "__main__":
    main(ANALYTICS)
