#!/bin/sh
# One-shot, idempotent, run by docker-compose as PostgreSQL's superuser (PGHOST, PGUSER, PGPASSWORD set there).
# Gives every process its own role with what it needs and no more: Temporal owns only its two databases; the
# application's tables belong to the migrations' role, and the API and the workers only read and write rows;
# site databases are made by a role that can do just that. The passwords in .env always win, so rotating one
# there and running `docker compose up` again applies it.
set -eu
# An .env made before a role existed lacks its password: add one, 48 hex digits as `make deploy-env` makes.
: "${TEMPORAL_DB_PASSWORD:?is empty: run make deploy-env}"
: "${SITE_PROVISIONER_PASSWORD:?is empty: run make deploy-env, or add it to .env}"
: "${OWNER_DB_PASSWORD:?is empty: run make deploy-env, or add it to .env}"
: "${API_DB_PASSWORD:?is empty: run make deploy-env, or add it to .env}"
: "${WORKER_DB_PASSWORD:?is empty: run make deploy-env, or add it to .env}"

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

# The application's three roles, none a superuser, none able to make databases or roles:
# - lifecycle_owner owns the `lifecycle` database and its tables, and runs the migrations (the `migrate` job),
#   which then grant the other two SELECT, INSERT, UPDATE and DELETE on every table (lifecycle/migrate.py);
# - lifecycle_api, the API: those rows, nothing more;
# - lifecycle_worker, the workers: the same, and pg_read_all_stats, because the deleters slow down on other
#   sessions' lock waits, autovacuum and replica lag (lifecycle/deletion/budget.py), which the statistics
#   views show only to their own role without it. Site databases they make as site_provisioner.
psql -v ON_ERROR_STOP=1 -v owner_password="$OWNER_DB_PASSWORD" -v api_password="$API_DB_PASSWORD" \
    -v worker_password="$WORKER_DB_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE %I', name)
  FROM (VALUES ('lifecycle_owner'), ('lifecycle_api'), ('lifecycle_worker')) AS wanted (name)
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = name) \gexec
ALTER ROLE lifecycle_owner WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'owner_password';
ALTER ROLE lifecycle_api WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'api_password';
ALTER ROLE lifecycle_worker WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'worker_password';
GRANT pg_read_all_stats TO lifecycle_worker;
SELECT 'CREATE DATABASE lifecycle OWNER lifecycle_owner'
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'lifecycle') \gexec
-- The image made it owned by the superuser; an earlier release migrated as that superuser.
ALTER DATABASE lifecycle OWNER TO lifecycle_owner;
REVOKE CONNECT ON DATABASE lifecycle FROM PUBLIC;
GRANT CONNECT ON DATABASE lifecycle TO lifecycle_api, lifecycle_worker;
-- Every role may connect to these by default, every site's role included, which has no business there. The
-- provisioner works from `postgres` (SITE_DATABASE_URL); the superuser needs no grant.
REVOKE CONNECT, TEMPORARY ON DATABASE postgres, template1 FROM PUBLIC;
GRANT CONNECT ON DATABASE postgres TO site_provisioner;
SQL

# Inside `lifecycle`: what an earlier release's migrations made as the superuser goes to the owner, or the next
# migration could not alter it (indexes, constraints, triggers and identity sequences follow their tables).
psql -v ON_ERROR_STOP=1 -d lifecycle <<'SQL'
DO $$
DECLARE
    statement text;
BEGIN
    FOR statement IN
        SELECT format('ALTER TABLE %s OWNER TO lifecycle_owner', c.oid::regclass)
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relowner <> 'lifecycle_owner'::regrole
        UNION ALL
        SELECT format('ALTER ROUTINE %s OWNER TO lifecycle_owner', p.oid::regprocedure)
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = 'public' AND p.proowner <> 'lifecycle_owner'::regrole
    LOOP
        EXECUTE statement;
    END LOOP;
END $$;
-- PostgreSQL 15's default, said here because the API and the workers rely on it: only the owner makes tables.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
SQL

# Each service of the Procfile (services/) owns a database of its name as a role of its name, in which the service
# applies its own schema at every start (services/runtime/database.py): no CREATEDB or CREATEROLE, no other
# database. pg_read_all_stats for its deleters' pressure signals, as lifecycle_worker. No other role connects to
# it: an account export asks the service for its part (ExportSubjectData).
for service in chat analytics knowledge integrations; do
    variable=$(echo "${service}_DB_PASSWORD" | tr '[:lower:]' '[:upper:]')
    password=$(printenv "$variable" || true)
    if [ -z "$password" ]; then
        echo "$variable is empty: run make deploy-env, or add it to .env" >&2
        exit 1
    fi
    psql -v ON_ERROR_STOP=1 -v service="$service" -v password="$password" <<'SQL'
SELECT format('CREATE ROLE %I', :'service') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'service') \gexec
ALTER ROLE :"service" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'password';
GRANT pg_read_all_stats TO :"service";
SELECT format('CREATE DATABASE %I OWNER %I', :'service', :'service')
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'service') \gexec
REVOKE CONNECT, TEMPORARY ON DATABASE :"service" FROM PUBLIC;
SQL
done

# Temporal's visibility schema needs btree_gin. It is a trusted extension that the owner could create itself,
# but creating it here keeps the schema job independent of that.
psql -v ON_ERROR_STOP=1 -d temporal_visibility -c 'CREATE EXTENSION IF NOT EXISTS btree_gin'
echo "roles temporal, site_provisioner, lifecycle_owner, lifecycle_api, lifecycle_worker and the services' are ready"
