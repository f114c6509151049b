"""The race data as Dagster's asset catalog shows it: daily-partitioned assets, their lineage, the events the runs
record, the checks on the cards, the automation of the derived assets and the freshness alerts.

The jobs, schedules and sensors stay the audit trail (what ran, when, with which outcome); the assets describe the
data those runs store in the race database, one partition per racing day.
"""
