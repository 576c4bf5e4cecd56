"""The REST service (FastAPI). ``create_app`` builds the app; models and indexes load in its lifespan."""

from service.api.app import create_app

__all__ = ["create_app"]
