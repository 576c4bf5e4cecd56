"""A real uvicorn server of the app in a thread of the test's process, with the options ``priorart serve`` gives it
(tests that speak HTTP to a running server, not to an in-process test client)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn

from service.api import create_app
from service.api.server import uvicorn_options
from service.settings import Settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def live_server(settings: Settings, http: str = "auto") -> Iterator[str]:
    """``host:port`` of the app over ``settings.index_dir``, served until the block ends."""
    port = free_port()
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, loop="asyncio", log_level="warning",
                            lifespan="on", **uvicorn_options(settings, http=http))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
