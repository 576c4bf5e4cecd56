"""Experiments over the real data (each a module with a ``run_*`` function and a CLI command)."""


class ExperimentError(ValueError):
    """An experiment cannot run on this input or with these settings (the message says why and what to do)."""
