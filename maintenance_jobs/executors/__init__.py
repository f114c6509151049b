"""Executors: the work each maintenance task does, as plain functions the ops call."""
