"""Pushing a watch's new hits to its webhook (issue 62 item 3), at least once.

An evaluation that finds hits for a watch with a webhook queues one delivery (the table ``deliveries``) in the same
transaction as the hits (service/watch/store.py ``record``): an outbox, so no hit is lost across a crash or a restart.
:func:`deliver` then POSTs each due delivery, one deliverer at a time (the database's ``deliver`` lock: an advisory
lock on PostgreSQL, so one replica delivers); a 2xx answer marks it delivered, anything else (an error status, a
refused connection, a timeout) schedules it again after a backoff that doubles from ``backoff_s`` up to
:data:`MAX_BACKOFF_S`, for :data:`MAX_ATTEMPTS` attempts (then it stays in the log, given up). A delivery the
receiver got but whose answer was lost is sent again: the receiver deduplicates by each hit's ``id`` (or the
``X-Priorart-Delivery`` header).

The request::

    POST <url>
    Content-Type: application/json
    X-Priorart-Event: watch.hits
    X-Priorart-Delivery: <delivery id>
    X-Priorart-Signature: sha256=<hex HMAC-SHA256 of the body, keyed by the webhook's secret>

    {"event": "watch.hits", "delivery": "...", "watch": {"id": "...", "name": "..."}, "build": "...",
     "generation": 7, "hits": [{"id": "<watch>:<build>:<generation>:<doc_id>", "doc_id": ..., "rank": ...,
     "score": ..., "title": ..., "publication_date": ..., "generation": 7, "found_at": ..., "passage": {...}}]}

The server's watch runner delivers after each evaluation and again when a retry is due; ``priorart add`` and
``priorart watch run`` deliver after theirs.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from service.watch.models import WatchRequest
from service.watch.models import now as stamp

if TYPE_CHECKING:
    from service.watch.models import WatchHit

log = logging.getLogger(__name__)

DELIVER_LOCK = "deliver"
BACKOFF_S = 30.0  # the first retry's wait; doubled at each failure
MAX_BACKOFF_S = 3600.0
MAX_ATTEMPTS = 12  # about 19 hours of retries from 30 s
TIMEOUT_S = 10.0
BATCH = 100  # due deliveries read at a time
SIGNATURE_HEADER = "X-Priorart-Signature"


def payload(delivery: str, watch_id: str, name: str, build: str, generation: int, hits: Sequence[WatchHit]) -> str:
    """The JSON body of a delivery (module docstring)."""
    return json.dumps({
        "event": "watch.hits", "delivery": delivery, "watch": {"id": watch_id, "name": name}, "build": build,
        "generation": generation,
        "hits": [{"id": f"{watch_id}:{build}:{generation}:{h.doc_id}", **h.model_dump(mode="json")} for h in hits],
    }, sort_keys=True)


def signature(secret: str, body: bytes) -> str:
    """The value of the signature header: ``sha256=`` and the body's HMAC-SHA256 keyed by ``secret``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


Post = Callable[[str, bytes, dict[str, str], float], int]
"""``post(url, body, headers, timeout) -> HTTP status`` (raises ``OSError`` when no answer comes)."""


def http_post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
    """POST with the standard library; the status (an error status too), ``OSError`` without an answer."""
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the watch's own http(s) URL
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


@dataclass
class DeliveryReport:
    """What one :func:`deliver` did."""

    delivered: int = 0
    failed: int = 0  # attempts that failed (retried later, or given up)
    given_up: int = 0
    busy: bool = False  # another deliverer held the lock
    next_due: float | None = None  # when the next retry is due (epoch seconds; None: nothing pending)

    def to_dict(self) -> dict[str, Any]:
        return {"delivered": self.delivered, "failed": self.failed, "given_up": self.given_up, "busy": self.busy,
                "next_due": self.next_due}


def deliver(store: Any, *, post: Post = http_post, backoff_s: float = BACKOFF_S,
            timeout_s: float = TIMEOUT_S, now: Callable[[], float] = time.time,
            max_attempts: int = MAX_ATTEMPTS) -> DeliveryReport:
    """POST every due delivery of ``store`` (a :class:`service.watch.store.WatchStore`, which imports this module
    for the deliveries it queues) once (module docstring); returns what happened and when the next retry is due."""
    report = DeliveryReport()
    if not store.exists:
        return report
    with store.db.lock(DELIVER_LOCK, wait=False) as got:
        if not got:
            report.busy = True
            return report
        due = now()  # (what a failure now schedules again is not due in this call: one attempt each)
        with contextlib.closing(store.connect()) as conn:
            while True:
                rows = conn.execute(
                    "SELECT d.id, d.url, d.payload, d.attempts, w.request FROM deliveries d JOIN watches w "
                    "ON w.id = d.watch_id WHERE d.delivered IS NULL AND d.attempts < ? AND d.next_attempt <= ? "
                    "ORDER BY d.next_attempt, d.created LIMIT ?", (max_attempts, due, BATCH)).fetchall()
                if not rows:
                    break
                for did, url, body_text, attempts, request in rows:
                    webhook = WatchRequest.model_validate_json(request).webhook
                    body = body_text.encode("utf-8")
                    headers = {"Content-Type": "application/json", "User-Agent": "priorart-watch",
                               "X-Priorart-Event": "watch.hits", "X-Priorart-Delivery": did}
                    if webhook is not None:
                        headers[SIGNATURE_HEADER] = signature(webhook.secret, body)
                    status: int | None = None
                    error: str | None = None
                    try:
                        status = post(url, body, headers, timeout_s)
                    except OSError as exc:  # refused, unreachable, timed out
                        error = f"{type(exc).__name__}: {exc}"[:500]
                    ok = status is not None and 200 <= status < 300
                    if not ok and error is None:
                        error = f"HTTP {status}"
                    tries = attempts + 1
                    wait = min(backoff_s * 2 ** (tries - 1), MAX_BACKOFF_S)
                    conn.execute("UPDATE deliveries SET attempts = ?, delivered = ?, last_status = ?, last_error = ?, "
                                 "next_attempt = ? WHERE id = ?",
                                 (tries, stamp() if ok else None, status, None if ok else error,
                                  max(now(), due) + wait if not ok else 0.0, did))
                    if ok:
                        report.delivered += 1
                    else:
                        report.failed += 1
                        report.given_up += tries >= max_attempts
                        log.warning("watch webhook %s: delivery %s failed (%s, attempt %d of %d)%s", url, did, error,
                                    tries, max_attempts, "" if tries >= max_attempts else f", again in {wait:.0f} s")
            row = conn.execute("SELECT MIN(next_attempt) FROM deliveries WHERE delivered IS NULL AND attempts < ?",
                               (max_attempts,)).fetchone()
            report.next_due = float(row[0]) if row and row[0] is not None else None
    if report.delivered or report.failed:
        log.info("watch webhooks: %d delivered, %d failed", report.delivered, report.failed)
    return report


__all__ = ["BACKOFF_S", "MAX_ATTEMPTS", "SIGNATURE_HEADER", "DeliveryReport", "deliver", "http_post", "payload",
           "signature"]
