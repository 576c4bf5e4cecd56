"""Benchmarks that print measured figures (never timed assertions)."""
