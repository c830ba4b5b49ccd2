#!/bin/sh
# One-shot, idempotent: creates Temporal's schemas or upgrades them to the image's version, as the `temporal` role.
# Connection settings come from SQL_PLUGIN, SQL_HOST, SQL_PORT, SQL_USER and SQL_PASSWORD (docker-compose.yml).
set -eu
SCHEMAS=/etc/temporal/schema/postgresql/v12

# Bounded: a database that is still unreachable after a minute is a real fault, reported by a failed job.
with_retries() {
    attempt=1
    until "$@"; do
        if [ "$attempt" -ge 20 ]; then
            echo "gave up after $attempt attempts: $*" >&2
            return 1
        fi
        attempt=$((attempt + 1))
        sleep 3
    done
}

for store in temporal:temporal visibility:temporal_visibility; do
    schema=${store%%:*}
    database=${store#*:}
    with_retries temporal-sql-tool --db "$database" setup-schema -v 0.0
    with_retries temporal-sql-tool --db "$database" update-schema -d "$SCHEMAS/$schema/versioned"
done
