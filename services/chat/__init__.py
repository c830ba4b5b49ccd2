"""The chat service: a bot's conversations and their messages, in the service's own database."""

from services.runtime.definition import Seed, ServiceDefinition, bot_table
from services.runtime.tables import TableDeleter

CHAT = ServiceDefinition(
    name="chat",
    schema=(
        *bot_table("conversations", "title varchar(200) NOT NULL, created_at timestamptz NOT NULL DEFAULT now()"),
        *bot_table(
            "messages",
            "conversation_ref bigint NOT NULL, body text NOT NULL, created_at timestamptz NOT NULL DEFAULT now()",
        ),
    ),
    tables=lambda objects: (TableDeleter("conversations"), TableDeleter("messages")),
    seeds={
        "conversations": Seed(
            0.10,
            "INSERT INTO conversations (bot_id, title) SELECT $1, 'conversation ' || g FROM generate_series(1, $2) g",
        ),
        "messages": Seed(
            0.60,
            "INSERT INTO messages (bot_id, conversation_ref, body) "
            "SELECT $1, g % 1000, repeat('lorem ipsum ', 8) || g FROM generate_series(1, $2) g",
        ),
    },
)
