"""Experiments over the real data (each a module with a ``run_*`` function and a CLI command).

Their indexes are built without the learned ranker of ``/search``'s first documents (``build_index(...,
ranker="none")``): the project's ranker learned on these grants, so an experiment measures the components it names,
and the ranker's own figures are cross-fitted by ``priorart-lab experiment ranking``."""


class ExperimentError(ValueError):
    """An experiment cannot run on this input or with these settings (the message says why and what to do)."""
