"""Settings of priorart: one object, read from the environment (prefix ``PRIORART_``) by pydantic-settings.

Every part of the project reads its knobs from :class:`Settings`: the API (limits, keys, CORS), the
engine and the pipeline composition (device, depth, ONNX threads), and the offline commands that load
an index the way the service does (``priorart evaluate``, ``priorart fuse``, the benchmarks). Limits
that other code checks are derived here (:attr:`Settings.limits`), so a setting cannot be capped
silently by a constant somewhere else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

Device = Literal["auto", "cpu", "cuda"]
"""Where ONNX models and FAISS run: the one definition."""
DEVICES: tuple[str, ...] = get_args(Device)
HARD_MAX_DEPTH = 10_000
"""Largest candidate depth any setting may allow (the dense and rerank stages score every candidate)."""


def cache_dir() -> Path:
    """This machine's cache folder (the converted encoder, parsed lexicons, document vectors): ``$PRIORART_CACHE_DIR``
    or ``~/.cache/priorart``."""
    return Path(os.environ.get("PRIORART_CACHE_DIR") or Path.home() / ".cache" / "priorart")


@dataclass(frozen=True)
class Limits:
    """Request limits derived from the settings (the API checks them; the engine clamps to them)."""

    max_query_chars: int
    max_k: int
    max_depth: int
    default_depth: int
    max_body_bytes: int
    timeout_s: float


class Settings(BaseSettings):
    """Every knob of priorart. ``PRIORART_INDEX_DIR=/data/index priorart serve`` etc."""

    model_config = SettingsConfigDict(env_prefix="PRIORART_", env_file=None, extra="ignore")

    index_dir: Path = Field(Path("index"), description="index folder built by `priorart build`")
    cpc_titles: Path | None = Field(None, description="CPC title list (tsv.gz) for code autocomplete/titles")
    device: Device = Field("auto", description="where ONNX models and FAISS run")
    onnx_threads: int = Field(1, ge=0, description="onnxruntime intra-op threads per graph (0 = onnxruntime's "
                              "default, one spinning thread per core)")
    max_query_chars: int = Field(20_000, ge=1, description="longest accepted query text")
    max_k: int = Field(1000, ge=1, description="largest k a client may ask for")
    max_depth: int = Field(1000, ge=1, le=HARD_MAX_DEPTH, description="largest candidate depth")
    default_depth: int = Field(1000, ge=1, description="candidate depth when the request gives none")
    max_body_bytes: int = Field(256_000, ge=1024, description="largest accepted request body")
    request_timeout_s: float = Field(30.0, gt=0, description="per-request time limit, reading the body included: a "
                                     "body not received in time is answered 408 and the connection closed")
    header_timeout_s: float = Field(10.0, gt=0, description="a connection must send a request's complete headers "
                                    "within this time of its opening or of its previous answer, else it is closed "
                                    "(408 if part of a request came): silent and slow-header (slowloris) connections")
    keep_alive_s: float = Field(5.0, gt=0, description="an idle keep-alive connection is closed after this time "
                                "(uvicorn's timeout_keep_alive)")
    max_connections: int = Field(1000, ge=16, description="open connections per server process; past it the "
                                 "connection idle longest (no request in flight) is closed to make room, and with "
                                 "none idle the new one is answered 503. Lowered at start to what the open-files "
                                 "limit leaves (ulimit -n, less twice the files the index holds open, less 64)")
    max_header_bytes: int = Field(32_768, ge=1024, description="largest request line and headers (431 past it)")
    api_key: str | None = Field(None, description="when set, requests must carry it in X-API-Key; several keys "
                                "separated by commas are several clients, each with its own watches")
    admin_key: str | None = Field(None, description="key for /admin/* (X-API-Key); unset: the admin routes are off "
                                  "(403). The API key never opens them")
    cors_origins: list[str] = Field(default_factory=list, description="allowed CORS origins")
    request_threads: int = Field(0, ge=0, description="threads that run /search and /passages: 0 runs them in the "
                                 "server's event loop, one at a time (a request over request_timeout_s is answered "
                                 "504 when it ends); n >= 1 in n worker threads, answered 504 at the limit. More "
                                 "cores: --workers")
    reload_interval_s: float = Field(2.0, ge=0, description="how often the server looks for a new generation of "
                                     "its index (priorart add/delete/compact) and loads it; 0: only on /admin/reload")
    shard_timeout_s: float = Field(10.0, gt=0, description="a sharded index: how long a search waits for a shard "
                                   "before answering with the other shards' hits (partial: true)")
    kernel_cache: Path | None = Field(None, description="compiled kernels filled by `priorart warmup` (the image's: "
                                      "/opt/priorart/kernel-cache), read-only is fine: `priorart serve` copies them "
                                      "into NUMBA_CACHE_DIR at start, so that a new container does not compile them "
                                      "(30-40 s); unset: numba's own cache (service/startup.py)")
    database_url: str | None = Field(None, description="PostgreSQL database of the watches (postgresql://user@host/"
                                     "db), shared by every replica and `priorart add`/`watch`; unset: SQLite in the "
                                     "state folder (one host). One database per index")
    webhook_allow: str = Field("", description="host names and networks a watch's webhook may reach although not "
                               "public (comma-separated: hooks.internal, 10.1.0.0/16, 127.0.0.1); by default webhooks "
                               "reach public addresses only (service/watch/webhooks.py)")
    webhook_backoff_s: float = Field(30.0, gt=0, description="a watch webhook's first retry after a failed delivery; "
                                     "doubled at each failure up to an hour (service/watch/webhooks.py)")
    state_dir: Path | None = Field(None, description="folder of the saved searches (watches: SQLite), beside the "
                                   "index folder, never inside it (a rebuild replaces that); default: INDEX_DIR.state")
    evidence_docs: int = Field(10, ge=0, description="/search orders its first N documents with their best passage "
                               "(passage evidence) unless a request says otherwise; 0: the fused order. Chosen by "
                               "`priorart-lab experiment ranking`: docs/RESULTS.md, 'Passage evidence in /search'")
    evidence_weight: float = Field(1.0, ge=0, le=1, description="weight of the best passage against the fused score "
                                   "in the order of those N documents (1: the best passage alone)")
    evidence_by: Literal["auto", "passage"] = Field(
        "auto", description="what orders those documents: auto, the index's learned ranker when it has one (its "
        "first documents, evidence_weight unused), else the best passage; passage: the best passage even where "
        "the index has a ranker. Chosen by `priorart-lab experiment ranking`: docs/RESULTS.md, 'Passage evidence in "
        "/search'")
    log_level: str = "INFO"

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.default_depth > self.max_depth:
            raise ValueError(f"default_depth ({self.default_depth}) is over max_depth ({self.max_depth})")
        return self

    @property
    def api_keys(self) -> list[str]:
        """The API keys of ``api_key`` (comma-separated); empty: no key is asked for."""
        return [k.strip() for k in (self.api_key or "").split(",") if k.strip()]

    @property
    def limits(self) -> Limits:
        return Limits(self.max_query_chars, self.max_k, self.max_depth, self.default_depth, self.max_body_bytes,
                      self.request_timeout_s)
