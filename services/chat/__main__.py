"""`python -m services.chat`: the chat service's worker (services/runtime/worker.py)."""

from services.chat import CHAT
from services.runtime.worker import main

if __name__ == "__main__":
    main(CHAT)
