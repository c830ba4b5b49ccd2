"""`python -m services.knowledge`: the knowledge service's worker (services/runtime/worker.py)."""

from services.knowledge import KNOWLEDGE
from services.runtime.worker import main

if __name__ == "__main__":
    main(KNOWLEDGE)
