"""Race-time checkpoints: T-60 and T-15 odds snapshots and the T+5 results check, driven by each race's start time."""
