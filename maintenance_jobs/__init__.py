"""Homelab maintenance tasks defined as database rows, dispatched on Dagster."""
