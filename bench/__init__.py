"""Benchmarks; one command each (see the Makefile)."""
