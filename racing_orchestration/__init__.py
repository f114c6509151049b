"""Racing data orchestration: the NZ TAB racing API scraped on Dagster.

`defs` is exposed here so `dagster asset materialize -m racing_orchestration ...` and `dagster job execute -m
racing_orchestration ...` find the code location's definitions.
"""

from racing_orchestration.definitions import defs

__all__ = ["defs"]
