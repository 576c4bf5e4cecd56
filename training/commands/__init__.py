"""CLI command groups; each module has ``register(app)`` and imports its heavy work lazily."""
