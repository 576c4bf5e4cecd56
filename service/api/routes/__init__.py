"""API routes, one module per area."""
