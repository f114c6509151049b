"""The execution history: every ended maintenance run's summary in the registry (`task_executions`), written once
when the run ends (run status sensors) or later by the backfill sensor, so it outlives Dagster's run retention; and
what reads it back merged with the runs still live in Dagster's run storage (`/executions`, the per-task history).
"""
