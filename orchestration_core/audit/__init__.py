"""The audit trail: run retention (cleanup), audit queries and failure/freshness alerts."""
