"""The scheduler: owns job definitions and due times, fires occurrences exactly once."""
