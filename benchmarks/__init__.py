"""Benchmarks of export speed and memory (run by hand, not in the test suite)."""
