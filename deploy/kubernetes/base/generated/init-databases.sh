#!/bin/sh
# First-start initialisation of the compose Postgres (run by the postgres image's entrypoint from
# /docker-entrypoint-initdb.d, as the superuser, only while the data volume is empty).
# One role and one database per concern: Dagster's run/event/schedule storage, the race data and the maintenance
# task registry. Passwords come from the environment (.env) and reach SQL as psql variables, never spliced into text.
set -eu

: "${DAGSTER_DB_PASSWORD:?DAGSTER_DB_PASSWORD is not set (see .env.example)}"
: "${RACING_DB_PASSWORD:?RACING_DB_PASSWORD is not set (see .env.example)}"
: "${MAINTENANCE_DB_PASSWORD:?MAINTENANCE_DB_PASSWORD is not set (see .env.example)}"

create_database() {
    # $1 = role and database name, $2 = password
    psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname "${POSTGRES_DB:-postgres}" \
        -v name="$1" -v password="$2" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', :'name', :'password')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'name') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'name', :'name')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'name') \gexec
-- Only the owner (and the superuser) may connect: the race-data role cannot read Dagster's storage and vice versa.
SELECT format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', :'name') \gexec
SQL
}

create_database dagster "$DAGSTER_DB_PASSWORD"
create_database racing "$RACING_DB_PASSWORD"
create_database maintenance "$MAINTENANCE_DB_PASSWORD"
