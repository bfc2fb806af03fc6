"""The worker: claims executions with a lease, runs them against their target, reports."""
