"""The local stack `make run` starts: embedded Postgres, the simulated TAB feed and `dagster dev`."""
