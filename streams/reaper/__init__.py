"""The reaper: owns lease expiry; redelivers executions whose worker went silent."""
