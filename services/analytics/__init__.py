"""The analytics service: a bot's analytics events, in the service's own database."""

from services.runtime.definition import Seed, ServiceDefinition, bot_table
from services.runtime.tables import TableDeleter

ANALYTICS = ServiceDefinition(
    name="analytics",
    schema=bot_table(
        "analytics_events",
        "kind varchar(50) NOT NULL, payload jsonb NOT NULL DEFAULT '{}'::jsonb,"
        " occurred_at timestamptz NOT NULL DEFAULT now()",
    ),
    tables=lambda objects: (TableDeleter("analytics_events"),),
    seeds={
        "analytics_events": Seed(
            0.265,
            "INSERT INTO analytics_events (bot_id, kind, payload) "
            "SELECT $1, 'event', jsonb_build_object('n', g) FROM generate_series(1, $2) g",
        )
    },
)
