"""What both code locations and the control API share, with no Definitions of its own: run tags and outcomes,
the Postgres URL and engine factory, the platform's settings, the run audit and retention, and the only modules
that reach into Dagster's private storage APIs."""
