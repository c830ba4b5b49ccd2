"""The knowledge service: a bot's knowledge documents, rows in the service's own database and their content as
objects in the S3 store (`documents/<bot id>/...`), deleted in DeleteObjects batches of at most 1,000 keys."""

from services.knowledge.documents import DocumentDeleter
from services.runtime.definition import Seed, ServiceDefinition, bot_table

KNOWLEDGE = ServiceDefinition(
    name="knowledge",
    schema=bot_table(
        "knowledge_documents",
        "title varchar(200) NOT NULL, storage_key varchar(300) NOT NULL, size_bytes integer NOT NULL,"
        " created_at timestamptz NOT NULL DEFAULT now()",
    ),
    tables=lambda objects: (DocumentDeleter("knowledge_documents", objects=objects),),
    seeds={
        "knowledge_documents": Seed(
            0.03,
            "INSERT INTO knowledge_documents (bot_id, title, storage_key, size_bytes) "
            "SELECT $1::uuid, 'document ' || g, $1::uuid::text || '/' || g || '.txt', 32 "
            "FROM generate_series(1, $2) g",
        )
    },
    uses_objects=True,
)
