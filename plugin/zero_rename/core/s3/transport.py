"""HTTP/1.1 to one origin over the standard library's ``http.client``: the sending of
the requests the core signs itself (:mod:`.signing`) and of the streamed upload
listing (:mod:`.listing`).

A pool of keep-alive connections, as large as the client's configuration says,
a caller past it waiting for one to come back. Nothing else: no redirect is
followed, no request retried (the callers retry as botocore's standard mode
does), no body decoded (a body is handed over as the store sent it, as
botocore's client hands it over), no proxy (the callers step aside for
botocore's client where one is configured, :func:`.http.direct_unsupported`).
urllib3 did the same here; importing it cost each fresh process some 30 ms of
CPU (its URL module compiles large expressions at import), on every Spark
driver-side worker, every task's worker and every command, twice on a write's
critical path.

A failure says which of two things happened, because a caller must tell them
apart (the protocol's "failed, safe to retry" against "outcome unknown"):

- :class:`NotConnected`: no connection could be made, so nothing was sent
  (:class:`TlsRefused`: the store's certificate was not trusted);
- :class:`NoAnswer`: the request may have reached the store, and no whole
  answer came back (a reset, a timeout, a cut body).
"""

from __future__ import annotations

import http.client
import select
import ssl
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from email.message import Message
from urllib.parse import urlsplit

__all__ = [
    "ConnectionPool",
    "NoAnswer",
    "NotConnected",
    "Response",
    "TlsRefused",
    "TransportError",
    "dropped",
]

# Methods whose empty body is sent without a Content-Length, as botocore sends them.
_NO_BODY = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})


class TransportError(Exception):
    """No whole answer: :class:`NotConnected` or :class:`NoAnswer`."""


class NoAnswer(TransportError):
    """The request may have been carried out; its answer did not arrive whole."""


class NotConnected(TransportError):
    """No connection to the store could be made: the request was not sent."""


class TlsRefused(NotConnected):
    """The TLS handshake failed: most often a certificate nothing in the CA bundle
    vouches for. The request was not sent."""


@dataclass(frozen=True)
class Response:
    """A whole answer: its status, its headers (looked up case-blind), its body."""

    status: int
    headers: Message
    data: bytes


class ConnectionPool:
    """Keep-alive connections to ``origin`` (``scheme://host[:port]``). Thread-safe:
    at most ``maxsize`` requests are in flight, a caller past them waits."""

    def __init__(
        self,
        origin: str,
        *,
        maxsize: int,
        connect_timeout: float,
        read_timeout: float,
        ca_file: str | None = None,
    ) -> None:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) origin: {origin!r}")
        self.origin = origin
        # The port always given: http.client would read the end of an IPv6
        # address without one ("[::1]") as its port.
        default = 443 if parts.scheme == "https" else 80
        self._host, self._port = parts.hostname, parts.port or default
        self._context = (
            ssl.create_default_context(cafile=ca_file) if parts.scheme == "https" else None
        )
        self._connect_timeout, self._read_timeout = connect_timeout, read_timeout
        self._slots = threading.BoundedSemaphore(max(1, maxsize))
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def request(
        self,
        method: str,
        target: str,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """Send one request for ``target`` (path and query) and read its answer whole.

        Raises:
            NotConnected: no connection could be made.
            NoAnswer: the answer did not arrive whole.
        """
        with self._slots:
            connection = self._take()
            try:
                answer = self._send(connection, method, target, body, headers)
                data = answer.read()
            except (OSError, http.client.HTTPException) as exc:
                connection.close()
                raise NoAnswer(f"{type(exc).__name__}: {exc}") from exc
            self._give_back(connection, answer)
            return Response(answer.status, answer.headers, data)

    def stream(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str] | None = None,
        *,
        chunk: int = 1 << 16,
    ) -> _Streamed:
        """Send one request and hand its answer over as it arrives (a context
        manager; the connection is closed when it ends, read whole or not)."""
        return _Streamed(self, method, target, headers, chunk)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    # -- connections --------------------------------------------------------
    def _take(self) -> http.client.HTTPConnection:
        """An idle connection the store has not closed meanwhile, else a new one."""
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                return self._new()
            if not dropped(connection):
                return connection
            connection.close()

    def _new(self) -> http.client.HTTPConnection:
        if self._context is None:
            return http.client.HTTPConnection(self._host, self._port, timeout=self._connect_timeout)
        return http.client.HTTPSConnection(
            self._host, self._port, timeout=self._connect_timeout, context=self._context
        )

    def _send(
        self,
        connection: http.client.HTTPConnection,
        method: str,
        target: str,
        body: bytes,
        headers: Mapping[str, str] | None,
    ) -> http.client.HTTPResponse:
        if connection.sock is None:
            try:
                connection.connect()  # TCP and TLS, within the connect timeout
            except OSError as exc:
                connection.close()
                refused = TlsRefused if isinstance(exc, ssl.SSLError) else NotConnected
                raise refused(f"{type(exc).__name__}: {exc}") from exc
            if connection.sock is not None:  # what connect() made
                connection.sock.settimeout(self._read_timeout)
        payload = None if not body and method in _NO_BODY else body
        connection.request(method, target, body=payload, headers=dict(headers or {}))
        return connection.getresponse()

    def _give_back(
        self, connection: http.client.HTTPConnection, answer: http.client.HTTPResponse
    ) -> None:
        if answer.will_close:
            connection.close()
            return
        with self._lock:
            self._idle.append(connection)


class _Streamed:
    """An answer read as it arrives: ``status``, ``read(n)`` and ``chunks()``."""

    def __init__(
        self,
        pool: ConnectionPool,
        method: str,
        target: str,
        headers: Mapping[str, str] | None,
        chunk: int,
    ) -> None:
        self._pool, self._method, self._target = pool, method, target
        self._headers, self._chunk = headers, chunk
        self._connection: http.client.HTTPConnection | None = None
        self._answer: http.client.HTTPResponse | None = None

    def __enter__(self) -> _Streamed:
        self._pool._slots.acquire()
        try:
            self._connection = self._pool._take()
            self._answer = self._pool._send(
                self._connection, self._method, self._target, b"", self._headers
            )
        except TransportError:
            self._release()
            raise
        except (OSError, http.client.HTTPException) as exc:
            self._release()
            raise NoAnswer(f"{type(exc).__name__}: {exc}") from exc
        return self

    @property
    def status(self) -> int:
        assert self._answer is not None
        return self._answer.status

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes of the body (fewer at its end)."""
        assert self._answer is not None
        try:
            data = self._answer.read(size)
        except (OSError, http.client.HTTPException) as exc:
            raise NoAnswer(f"{type(exc).__name__}: {exc}") from exc
        # http.client ends a body cut short of its Content-Length as if it were whole.
        if not data and size and self._answer.length:
            raise NoAnswer(f"IncompleteRead: the body ended {self._answer.length} byte(s) short")
        return data

    def chunks(self) -> Iterator[bytes]:
        """The body, a chunk at a time as it arrives."""
        while chunk := self.read(self._chunk):
            yield chunk

    def __exit__(self, *_: object) -> None:
        self._release()

    def _release(self) -> None:
        # Closed rather than kept: a body left half read cannot carry another answer.
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        self._pool._slots.release()


def dropped(connection: http.client.HTTPConnection) -> bool:
    """Whether an idle connection can no longer carry a request: closed here, or
    readable, which at rest means the store closed it (or sent what no request
    asked for)."""
    sock = connection.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
