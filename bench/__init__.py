"""Benchmarks (`make bench`): measured figures, never asserted by tests."""
