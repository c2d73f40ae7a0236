"""The connections the core's own requests go over: kept alive, replaced when the
store closed them while idle, and each failure named for what a caller may do."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from zero_rename.core.s3.transport import ConnectionPool, NoAnswer, NotConnected


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive unless told otherwise

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1  # type: ignore[attr-defined]

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = b"x" * 100
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.path == "/cut":  # a body cut short: the connection ends under it
            self.wfile.write(body[:10])
            self.close_connection = True
            return
        self.wfile.write(body)
        # Closed by the server after a whole answer, without saying so: the
        # client keeps the connection, which is dead when it comes to reuse it.
        self.close_connection = self.path == "/then-close"

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.connections = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def pool_for(server: ThreadingHTTPServer) -> ConnectionPool:
    host, port = server.server_address[:2]
    return ConnectionPool(f"http://{host}:{port}", maxsize=2, connect_timeout=2.0, read_timeout=2.0)


def test_answers_come_whole_over_one_kept_connection(server: ThreadingHTTPServer) -> None:
    pool = pool_for(server)
    for _ in range(3):
        answer = pool.request("GET", "/")
        assert (answer.status, answer.data) == (200, b"x" * 100)
        assert answer.headers["content-length"] == "100"  # looked up case-blind
    assert server.connections == 1  # type: ignore[attr-defined]
    pool.close()


def test_a_connection_the_store_closed_while_idle_is_replaced_unnoticed(
    server: ThreadingHTTPServer,
) -> None:
    pool = pool_for(server)
    assert pool.request("GET", "/then-close").status == 200
    time.sleep(0.1)  # the server's close reaches the idle connection
    # Sent on the dead connection, this request would fail with no answer: an
    # outcome unknown for a request that never left.
    assert pool.request("GET", "/").data == b"x" * 100
    assert server.connections == 2  # type: ignore[attr-defined]
    pool.close()


def test_a_cut_body_is_no_answer_and_the_next_request_gets_a_new_connection(
    server: ThreadingHTTPServer,
) -> None:
    pool = pool_for(server)
    with pytest.raises(NoAnswer, match="IncompleteRead"):
        pool.request("GET", "/cut")
    assert pool.request("GET", "/").status == 200
    assert server.connections == 2  # type: ignore[attr-defined]
    with pool.stream("GET", "/cut", chunk=4) as streamed, pytest.raises(NoAnswer):
        assert streamed.status == 200
        b"".join(streamed.chunks())
    pool.close()


def test_no_connection_is_not_connected_the_request_never_sent() -> None:
    with socket.socket() as taken:  # a port nothing listens on
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
    pool = ConnectionPool(
        f"http://127.0.0.1:{port}", maxsize=1, connect_timeout=1.0, read_timeout=1.0
    )
    with pytest.raises(NotConnected, match="ConnectionRefused"):
        pool.request("PUT", "/k", b"body")
    # The slot came back: a second try fails the same way rather than waiting.
    with pytest.raises(NotConnected):
        pool.request("GET", "/k")


@pytest.mark.parametrize(
    ("origin", "host", "port"),
    [
        ("http://[::1]", "::1", 80),
        ("https://[::1]:9443", "::1", 9443),
        ("https://s3.example.com", "s3.example.com", 443),
    ],
)
def test_each_origin_is_reached_on_its_port(origin: str, host: str, port: int) -> None:
    """An IPv6 origin without a port is reached on the scheme's, not on a port read
    from the end of its address."""
    connection = ConnectionPool(origin, maxsize=1, connect_timeout=1, read_timeout=1)._new()
    assert (connection.host, connection.port) == (host, port)
