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

Where a webhook may point (:func:`check_url`): a server must not be made to POST into its own network (SSRF). A
webhook's host must resolve to public addresses only, unless ``PRIORART_WEBHOOK_ALLOW`` (comma-separated host names
and networks: ``hooks.internal, 10.1.0.0/16, 127.0.0.1``) allows it: loopback, private, link-local (the cloud metadata
address 169.254.169.254), multicast, reserved and unspecified addresses are refused. It is checked when the watch is
saved (a 422) and again before each delivery (an address that changed since is refused, logged, and retried like a
failure); redirects are not followed (a 3xx is a failed delivery), so a public receiver cannot bounce a delivery
inward. (Between the check and urllib's own lookup a DNS answer could still change: a receiver's DNS is trusted
that far.)
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import socket
import time
import urllib.error
import urllib.parse
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


class WebhookRefusedError(ValueError):
    """A webhook URL that points where webhooks may not go (module docstring); the message says why and how to allow
    it."""


def allowed_targets(allow: str | None) -> tuple[set[str], list[ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    """``PRIORART_WEBHOOK_ALLOW`` (None: read from the settings) as host names and networks."""
    if allow is None:
        from service.settings import Settings

        allow = Settings().webhook_allow
    hosts: set[str] = set()
    nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for item in (x.strip() for x in allow.split(",")):
        if not item:
            continue
        try:
            nets.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            hosts.add(item.lower().rstrip("."))
    return hosts, nets


def check_url(url: str, allow: str | None = None) -> None:
    """Raise :class:`WebhookRefusedError` unless every address ``url``'s host resolves to is public or allowed."""
    parts = urllib.parse.urlsplit(str(url))
    host = (parts.hostname or "").lower().rstrip(".")
    if parts.scheme not in ("http", "https") or not host:
        raise WebhookRefusedError(f"webhook url {url!r}: an http(s) URL with a host")
    hosts, nets = allowed_targets(allow)
    if host in hosts:
        return
    try:
        infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80),
                                   proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise WebhookRefusedError(f"webhook url {url!r}: its host {host!r} does not resolve ({exc})") from exc
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if any(addr in n for n in nets):
            continue
        kind = next((k for k, bad in (("loopback", addr.is_loopback), ("link-local", addr.is_link_local),
                                      ("unspecified", addr.is_unspecified), ("multicast", addr.is_multicast),
                                      ("reserved", addr.is_reserved), ("private", addr.is_private))
                     if bad), None)
        if kind is not None or not addr.is_global:
            raise WebhookRefusedError(
                f"webhook url {url!r}: {host} is {addr}, a {kind or 'non-public'} address; webhooks reach public "
                f"addresses only, unless PRIORART_WEBHOOK_ALLOW names the host or a network holding it")


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:  # a 3xx is the answer: not followed
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def http_post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
    """POST with the standard library, redirects not followed; the status (an error status too), ``OSError``
    without an answer."""
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
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
            max_attempts: int = MAX_ATTEMPTS, allow: str | None = None) -> DeliveryReport:
    """POST every due delivery of ``store`` (a :class:`service.watch.store.WatchStore`, which imports this module
    for the deliveries it queues) once (module docstring); returns what happened and when the next retry is due.
    ``allow``: ``PRIORART_WEBHOOK_ALLOW``'s value (None: the settings')."""
    report = DeliveryReport()
    if allow is None:
        from service.settings import Settings

        allow = Settings().webhook_allow
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
                        check_url(url, allow)  # (again: the host may resolve elsewhere since the watch was saved)
                        status = post(url, body, headers, timeout_s)
                    except OSError as exc:  # refused, unreachable, timed out
                        error = f"{type(exc).__name__}: {exc}"[:500]
                    except WebhookRefusedError as exc:
                        error = str(exc)[:500]
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


__all__ = ["BACKOFF_S", "MAX_ATTEMPTS", "SIGNATURE_HEADER", "DeliveryReport", "WebhookRefusedError", "check_url",
           "deliver", "http_post", "payload", "signature"]
