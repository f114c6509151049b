"""The platform's monitoring: metrics, liveness, overdue tasks and the schedules' and sensors' state.

It reads storage (Dagster's instance, the task registry, the race database) and asks the Dagster webserver's GraphQL
for what the code locations declare (schedules, sensors, jobs), so it never loads a code location itself. The control
API serves what it computes (`/metrics`, `/health`, `/stats`, `/schedulers`).
"""
