"""ASGI entry point for process managers: ``uvicorn service.api.main:app`` (settings from the environment)."""

from service.api import create_app

app = create_app()
