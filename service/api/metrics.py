"""Prometheus metrics: request counts, request latency, per-stage latency. One registry per app."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "priorart_requests_total", "HTTP requests", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "priorart_request_seconds", "HTTP request latency", ["route"], buckets=_BUCKETS, registry=self.registry
        )
        self.stage_latency = Histogram(
            "priorart_stage_seconds", "Pipeline stage latency", ["stage"], buckets=_BUCKETS, registry=self.registry
        )
        self.index_docs = Gauge("priorart_index_documents", "Documents in the loaded index", registry=self.registry)
        self.reloads = Counter("priorart_index_reloads_total", "Index reloads", ["outcome"], registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)
