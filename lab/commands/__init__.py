"""The ``priorart-lab`` verbs, one module each with ``register(app)`` (lab/cli.py)."""
