"""The integrations service: a bot's integrations with other providers, in the service's own database."""

from services.runtime.definition import Seed, ServiceDefinition, bot_table
from services.runtime.tables import TableDeleter

INTEGRATIONS = ServiceDefinition(
    name="integrations",
    schema=bot_table(
        "integrations",
        "provider varchar(50) NOT NULL, config jsonb NOT NULL DEFAULT '{}'::jsonb,"
        " created_at timestamptz NOT NULL DEFAULT now()",
    ),
    tables=lambda objects: (TableDeleter("integrations"),),
    seeds={
        "integrations": Seed(
            0.005,
            "INSERT INTO integrations (bot_id, provider) SELECT $1, 'provider-' || g FROM generate_series(1, $2) g",
        )
    },
)
