"""The same midnight workload on the schedulers users would pick instead of Kadence, measured
the same way: N one-off jobs due at the same second T, each recording when it started; start
lateness = start - T, and lost/duplicated counts. `python -m bench.peers <peer> --jobs N`."""
