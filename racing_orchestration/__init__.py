"""Racing data orchestration: the NZ TAB racing API scraped on Dagster."""
