"""The task registry's Postgres schema, its Alembic migrations and engine handling."""
