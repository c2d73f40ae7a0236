"""A lineage catalog for the tests: an HTTP endpoint that keeps the OpenLineage
events posted to it (``POST /api/v1/lineage``, as Marquez takes them), each with
the ``Authorization`` header it came with."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ENDPOINT = "api/v1/lineage"


class Catalog(ThreadingHTTPServer):
    """Keeps every event posted to it; answers 201, as a catalog does."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Receive)
        self.events: list[tuple[str, dict[str, Any]]] = []  # (Authorization, event)
        self.bodies: list[bytes] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def transport(self, api_key: str) -> dict[str, Any]:
        """Airflow's ``[openlineage] transport`` posting here with ``api_key``."""
        return {
            "type": "http",
            "url": self.url,
            "endpoint": ENDPOINT,
            "auth": {"type": "api_key", "apiKey": api_key},
        }


class _Receive(BaseHTTPRequestHandler):
    server: Catalog

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        known = self.path == f"/{ENDPOINT}"
        if known:
            self.server.bodies.append(body)
            self.server.events.append((self.headers.get("Authorization", ""), json.loads(body)))
        self.send_response(201 if known else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def running_catalog() -> Iterator[Catalog]:
    server = Catalog()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
