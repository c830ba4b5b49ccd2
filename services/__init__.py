"""Services that own data about bots, each with its own database, worker process and task queue, joining the
deletions only through the registry and the deletion contract (proto/lifecycle/deletion/v1/service.proto)."""
