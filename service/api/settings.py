"""Service settings, read from the environment (prefix ``PRIORART_``) by pydantic-settings."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every knob of the online service. ``PRIORART_INDEX_DIR=/data/index priorart serve`` etc."""

    model_config = SettingsConfigDict(env_prefix="PRIORART_", env_file=None, extra="ignore")

    index_dir: Path = Field(Path("index"), description="index folder built by `priorart build`")
    cpc_titles: Path | None = Field(None, description="CPC title list (tsv.gz) for code autocomplete/titles")
    device: str = Field("auto", description="auto | cpu | cuda: where ONNX models and FAISS run")
    max_query_chars: int = Field(20_000, description="longest accepted query text")
    max_k: int = Field(1000, description="largest k a client may ask for")
    max_depth: int = Field(1000, description="largest candidate depth")
    default_depth: int = Field(1000, description="candidate depth when the request gives none")
    max_body_bytes: int = Field(256_000, description="largest accepted request body")
    request_timeout_s: float = Field(30.0, description="per-request time limit")
    api_key: str | None = Field(None, description="when set, requests must carry it in X-API-Key")
    admin_key: str | None = Field(None, description="key for /admin/* (defaults to api_key)")
    cors_origins: list[str] = Field(default_factory=list, description="allowed CORS origins")
    log_level: str = "INFO"
