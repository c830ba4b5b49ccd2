"""The project's own contract services, for the tooling that starts and seeds them (devstack, the tests, the
Procfile). The gateway never reads this: it knows only the registry."""

from services.analytics import ANALYTICS
from services.chat import CHAT
from services.integrations import INTEGRATIONS
from services.knowledge import KNOWLEDGE
from services.runtime.definition import ServiceDefinition

SERVICES: tuple[ServiceDefinition, ...] = (CHAT, ANALYTICS, KNOWLEDGE, INTEGRATIONS)
