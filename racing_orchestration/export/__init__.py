"""The daily Parquet export of the race data for analysts: one file per table and racing day
(docs/race-data-export.md)."""
