#!/bin/sh
# One-shot, idempotent, run by docker-compose as PostgreSQL's superuser (PGHOST, PGUSER, PGPASSWORD set there).
# Gives Temporal its own unprivileged role owning only its two databases. The password in .env always wins,
# so rotating it there and running `docker compose up` again applies it.
set -eu
: "${TEMPORAL_DB_PASSWORD:?is empty: run make deploy-env}"
: "${SITE_PROVISIONER_PASSWORD:?is empty: run make deploy-env}"

# The healthcheck already saw PostgreSQL over TCP; these bounded retries cover a restart in between.
attempt=1
until psql -qtA -c 'SELECT 1' >/dev/null; do
    if [ "$attempt" -ge 20 ]; then
        echo "PostgreSQL still unreachable after $attempt attempts" >&2
        exit 1
    fi
    attempt=$((attempt + 1))
    sleep 3
done

# psql quotes the password itself (:'temporal_password'); the shell never splices it into SQL.
psql -v ON_ERROR_STOP=1 -v temporal_password="$TEMPORAL_DB_PASSWORD" <<'SQL'
SELECT 'CREATE ROLE temporal' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'temporal') \gexec
ALTER ROLE temporal WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'temporal_password';
SELECT format('CREATE DATABASE %I OWNER temporal', name)
  FROM (VALUES ('temporal'), ('temporal_visibility')) AS wanted (name)
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = name) \gexec
-- Only their owner connects: not the application's per-site roles, nor any other role made later.
REVOKE CONNECT, TEMPORARY ON DATABASE temporal, temporal_visibility FROM PUBLIC;
SQL

# The workers make and drop each site's database and role as this role: CREATEROLE and CREATEDB, nothing more.
psql -v ON_ERROR_STOP=1 -v provisioner_password="$SITE_PROVISIONER_PASSWORD" <<'SQL'
SELECT 'CREATE ROLE site_provisioner' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'site_provisioner') \gexec
ALTER ROLE site_provisioner WITH LOGIN NOSUPERUSER CREATEDB CREATEROLE PASSWORD :'provisioner_password';
SQL

# Temporal's visibility schema needs btree_gin. It is a trusted extension that the owner could create itself,
# but creating it here keeps the schema job independent of that.
psql -v ON_ERROR_STOP=1 -d temporal_visibility -c 'CREATE EXTENSION IF NOT EXISTS btree_gin'
echo "roles temporal and site_provisioner, databases temporal and temporal_visibility are ready"
