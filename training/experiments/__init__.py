"""Experiments over the real data (each a module with a ``run_*`` function and a CLI command)."""
