"""A loopback S3 proxy that injects faults and other stores' quirks on the wire.

The botocore event hooks in ``tests/faults.py`` fail a call inside the client,
so botocore's HTTP layer never sees a dropped connection, a 503 from the
server or a response that never arrived. This proxy sits between boto3 and a
real S3 server (the suite's SeaweedFS, or moto's server) and does those things
to real requests: botocore's retries, its connection pool and its error
parsing run exactly as they would against a flaky store.

It also makes the server answer the way other stores do (MinIO, GCS's XML
API, AWS under contention, Ceph RGW 16's If-Match, a store whose conditional
PUT checks and writes in two steps without a lock), since a committer must
survive all of them, or refuse them, and only one server runs here.

Requests are forwarded verbatim, Host header included: SigV4 signs the Host
the client used (the proxy's), and the upstream checks the signature against
the Host it receives, so signatures stay valid without the proxy knowing any
secret. Only the quirks that change a request (dropping signed headers,
re-listing without paging parameters) need the credentials, to sign again.

For benchmarks it can also measure what a client makes the store do, off by
default: ``measure_copies`` sums the bytes each CopyObject and UploadPartCopy
copied inside the store (``copied_bytes``), and ``record_arrivals`` keeps when
each request arrived (``arrivals``), so that requests can be told apart by the
phase of a job they fell in, or grouped into round trips (:func:`round_trips`).

Limits: path-style addressing, plain HTTP, and whole bodies held in memory
(requests and responses are read completely before being passed on, so a
fault can still replace them); test-sized objects only.

Usage::

    with proxy_for(s3_server) as proxy:
        client = boto3.client("s3", endpoint_url=proxy.endpoint_url, ...)
        proxy.add("UploadPart", "lose")            # the first UploadPart: outcome unknown
        proxy.quirks = {"minio_upload_prefix"}

A ``hold`` rule keeps the requests it fires on waiting in the proxy, unsent, until
the test releases them, so that a process can be killed at an exact request (the
request then never reaches the store) or a reader can look at a half-done
commit::

        rule = proxy.add("CompleteMultipartUpload", "hold", nth=3, times=None)
        rule.arrived.wait(60)                      # two completes went through
        ...                                        # kill the client, or read
        proxy.release(rule, forward=False)         # drop the held requests
"""

from __future__ import annotations

import functools
import http.client
import io
import logging
import random
import socket
import struct
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit

import botocore.session
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest, HTTPHeaders
from botocore.credentials import Credentials

from zero_rename.core.s3.transport import dropped
from zero_rename.embedded_s3 import StartStop

log = logging.getLogger(__name__)

ACTIONS = frozenset({"error", "reset", "lose", "delay", "error_after", "hold", "cut"})
QUIRKS = frozenset(
    {
        "minio_upload_prefix",
        "minio_recomplete",
        "no_preconditions",
        "truncated_without_marker",
        "unsorted_uploads",
        "aws_conflict_409",
        "ceph_quoted_if_match",
        "racy_if_none_match",
        "racy_if_match",
    }
)
# How long a racy conditional PUT waits between its check and its write: racers
# that arrive together all pass the check before any of them writes.
RACE_WINDOW = 0.05
# Chaos names -> (action, status, code).
CHAOS = {
    "error500": ("error", 500, "InternalError"),
    "slowdown": ("error", 503, "SlowDown"),
    "reset": ("reset", 0, ""),
    "lose": ("lose", 0, ""),
    "delay": ("delay", 0, ""),
    "error_after": ("error_after", 500, "InternalError"),
    "cut": ("cut", 0, ""),
}
# What chaos() injects unless told otherwise.
CHAOS_ACTIONS = ("error500", "slowdown", "reset", "lose", "delay")

_MESSAGES = {
    "InternalError": "We encountered an internal error. Please try again.",
    "SlowDown": "Please reduce your request rate.",
    "NoSuchUpload": "The specified multipart upload does not exist. The upload ID may be "
    "invalid, or the upload may have been aborted or completed.",
    "ConditionalRequestConflict": "A conflicting operation occurred. If using PutObject you "
    "can retry the request.",
    "PreconditionFailed": "At least one of the pre-conditions you specified did not hold",
    "BadGateway": "The proxy could not reach the upstream S3 server.",
}
# Paging parameters MinIO ignores when listing uploads (minio/minio#20989).
_UPLOAD_PAGING = ("max-uploads", "key-marker", "upload-id-marker")
_PRECONDITIONS = ("if-match", "if-none-match")
# Bodies whose every chunk carries a signature chained to the header's: these
# cannot be signed again without re-framing the body (botocore never sends them).
_CHUNK_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
_NO_BODY_STATUS = frozenset({204, 304})
# Operations that copy data inside the store (measure_copies).
_COPIES = frozenset({"CopyObject", "UploadPartCopy"})


@functools.cache
def s3_operations() -> frozenset[str]:
    """The S3 operation names in botocore's service model."""
    model = botocore.session.get_session().get_service_model("s3")
    return frozenset(model.operation_names)


def round_trips(arrivals: Sequence[tuple[float, str]], delay: float) -> list[list[str]]:
    """Requests (arrival time, operation) grouped into sequential round trips,
    behind a proxy that delays every request by ``delay``: a new round wherever
    the proxy heard nothing for more than half a delay, so that some request must
    have waited for an answer; but only a request that came a whole delay after
    its round's first one can have waited for an answer of that round (none
    comes sooner), so a client held up by a busy machine between requests it
    sends together adds no round. Each round's operations sorted."""
    grouped: list[list[str]] = []
    began = last = 0.0
    for at, op in sorted(arrivals):
        if not grouped or (at - last > delay / 2 and at - began >= delay):
            grouped.append([])
            began = at
        grouped[-1].append(op)
        last = at
    return [sorted(ops) for ops in grouped]


class ProxyError(Exception):
    """The proxy cannot do what a quirk or rule asks (e.g. re-sign without credentials)."""


# -- requests and responses ---------------------------------------------------


@dataclass(frozen=True)
class S3Request:
    """One request as the client sent it, and the S3 operation it is."""

    method: str
    target: str  # path and query, still percent-encoded, as on the wire
    headers: tuple[tuple[str, str], ...]
    body: bytes  # decoded from chunked framing if it was chunked
    wire_body: bytes  # exactly the bytes that followed the headers
    op: str
    bucket: str
    key: str

    @classmethod
    def build(
        cls,
        method: str,
        target: str,
        headers: Iterable[tuple[str, str]],
        body: bytes = b"",
        wire_body: bytes | None = None,
    ) -> S3Request:
        headers = tuple(headers)
        op, bucket, key = classify(method, target, headers)
        return cls(
            method, target, headers, body, body if wire_body is None else wire_body, op, bucket, key
        )

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def raw_query(self) -> str:
        return urlsplit(self.target).query

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(self.raw_query, keep_blank_values=True)

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None

    def header(self, name: str) -> str | None:
        lname = name.lower()
        return next((v for k, v in self.headers if k.lower() == lname), None)

    def names(self) -> list[str]:
        """What ``key_contains`` is matched against: the key of an object call,
        the prefix of a listing, the keys of a DeleteObjects."""
        if self.key:
            return [self.key]
        if self.op == "DeleteObjects":
            return _delete_keys(self.body)
        prefix = self.param("prefix")
        return [prefix] if prefix is not None else []


@dataclass(frozen=True)
class Response:
    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        lname = name.lower()
        return next((v for k, v in self.headers if k.lower() == lname), None)

    def with_body(self, body: bytes) -> Response:
        """The same response carrying another body; Content-Length follows it."""
        headers = tuple(
            (k, str(len(body)) if k.lower() == "content-length" else v) for k, v in self.headers
        )
        return Response(self.status, self.reason, headers, body)


def error_response(
    status: int, code: str, request: S3Request, message: str | None = None
) -> Response:
    """An S3 error document, as S3 itself would send it."""
    resource = request.path
    text = message or _MESSAGES.get(code, f"injected by the test proxy: {code}")
    request_id = f"proxy-{random.getrandbits(48):012x}"
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{_escape(code)}</Code>'
        f"<Message>{_escape(text)}</Message><Resource>{_escape(resource)}</Resource>"
        f"<RequestId>{request_id}</RequestId></Error>"
    ).encode()
    if request.method == "HEAD":  # S3 answers HEAD errors without a body.
        body = b""
    headers = (
        ("Content-Type", "application/xml"),
        ("Content-Length", str(len(body))),
        ("x-amz-request-id", request_id),
    )
    reason = http.client.responses.get(status, "Error")
    return Response(status, reason, headers, body)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# -- which S3 operation is this? ------------------------------------------------

# Bucket sub-resources: query parameter -> the operation name after Get/Put/Delete.
_BUCKET_SUBRESOURCES = {
    "lifecycle": "BucketLifecycleConfiguration",
    "versioning": "BucketVersioning",
    "policy": "BucketPolicy",
    "tagging": "BucketTagging",
    "cors": "BucketCors",
    "acl": "BucketAcl",
    "encryption": "BucketEncryption",
    "website": "BucketWebsite",
    "logging": "BucketLogging",
    "replication": "BucketReplication",
    "notification": "BucketNotificationConfiguration",
    "ownershipControls": "BucketOwnershipControls",
    "publicAccessBlock": "PublicAccessBlock",
    "object-lock": "ObjectLockConfiguration",
    "accelerate": "BucketAccelerateConfiguration",
    "requestPayment": "BucketRequestPayment",
    "location": "BucketLocation",
    "policyStatus": "BucketPolicyStatus",
}
# botocore's names for the DELETE forms that differ from "Delete" + the Get/Put name.
_BUCKET_DELETES = {"lifecycle": "DeleteBucketLifecycle"}
_OBJECT_SUBRESOURCES = {
    "tagging": "ObjectTagging",
    "acl": "ObjectAcl",
    "retention": "ObjectRetention",
    "legal-hold": "ObjectLegalHold",
    "attributes": "ObjectAttributes",
    "torrent": "ObjectTorrent",
}


def classify(method: str, target: str, headers: Iterable[tuple[str, str]]) -> tuple[str, str, str]:
    """(operation, bucket, key) of a path-style request, named as botocore names it."""
    parts = urlsplit(target)
    query = parse_qs(parts.query, keep_blank_values=True)
    bucket, _, key = parts.path.lstrip("/").partition("/")
    bucket, key = unquote(bucket), unquote(key)
    copy = any(k.lower() == "x-amz-copy-source" for k, _ in headers)
    method = method.upper()
    if not bucket:
        return ("ListBuckets" if method == "GET" else f"{method}Root"), "", ""
    if not key:
        return _bucket_op(method, query), bucket, ""
    return _object_op(method, query, copy), bucket, key


def _bucket_op(method: str, query: Mapping[str, list[str]]) -> str:
    if method == "GET":
        if "uploads" in query:
            return "ListMultipartUploads"
        if "versions" in query:
            return "ListObjectVersions"
        if query.get("list-type") == ["2"]:
            return "ListObjectsV2"
    if method == "POST" and "delete" in query:
        return "DeleteObjects"
    for name, suffix in _BUCKET_SUBRESOURCES.items():
        if name in query:
            if method == "DELETE":
                return _BUCKET_DELETES.get(name, f"Delete{suffix}")
            return f"{method.capitalize()}{suffix}"
    return {
        "GET": "ListObjects",
        "HEAD": "HeadBucket",
        "PUT": "CreateBucket",
        "DELETE": "DeleteBucket",
    }.get(method, f"{method}Bucket")


def _object_op(method: str, query: Mapping[str, list[str]], copy: bool) -> str:
    upload = "uploadId" in query
    if method == "PUT" and upload and "partNumber" in query:
        return "UploadPartCopy" if copy else "UploadPart"
    if method == "POST":
        if "uploads" in query:
            return "CreateMultipartUpload"
        if upload:
            return "CompleteMultipartUpload"
        if "restore" in query:
            return "RestoreObject"
        if "select" in query:
            return "SelectObjectContent"
    if method == "GET" and upload:
        return "ListParts"
    if method == "DELETE" and upload:
        return "AbortMultipartUpload"
    for name, suffix in _OBJECT_SUBRESOURCES.items():
        if name in query and method in ("GET", "PUT", "DELETE"):
            return f"{method.capitalize()}{suffix}"
    if method == "PUT":
        return "CopyObject" if copy else "PutObject"
    return {"GET": "GetObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}.get(
        method, f"{method}Object"
    )


def _range_size(value: str | None) -> int | None:
    """Bytes in an ``x-amz-copy-source-range`` (``bytes=first-last``), or None."""
    if not value or not value.startswith("bytes="):
        return None
    first, _, last = value[len("bytes=") :].partition("-")
    try:
        return int(last) - int(first) + 1
    except ValueError:
        return None


def _delete_keys(body: bytes) -> list[str]:
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return []
    return [el.text or "" for el in root.iter() if _local(el.tag) == "Key"]


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


# -- rewriting and re-signing a request ----------------------------------------


class _Resigner(S3SigV4Auth):
    """SigV4 for S3 that signs the headers the client signed (less any dropped)
    and keeps the client's payload hash, since the body is sent unchanged."""

    def __init__(
        self,
        credentials: Credentials,
        region: str,
        payload_hash: str | None,
        signed: Collection[str] | None,
    ) -> None:
        super().__init__(credentials, "s3", region)
        self._payload_hash = payload_hash
        self._signed = (
            None
            if signed is None
            else {h.lower() for h in signed}
            | {"host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}
        )

    def payload(self, request: AWSRequest) -> str:
        if self._payload_hash is not None:
            return self._payload_hash
        return str(super().payload(request))

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        header_map = super().headers_to_sign(request)
        if self._signed is None:
            return header_map
        kept = HTTPHeaders()
        for name in set(header_map.keys()):
            if name in self._signed:
                for value in header_map.get_all(name):
                    kept[name] = value
        return kept


def _authorization_fields(value: str) -> dict[str, str]:
    """``AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...`` as a dict."""
    _, _, rest = value.partition(" ")
    fields = {}
    for item in rest.split(","):
        name, _, val = item.strip().partition("=")
        fields[name] = val
    return fields


def rewrite_request(
    request: S3Request,
    credentials: Credentials | None,
    region: str,
    *,
    drop_headers: Collection[str] = (),
    drop_query: Collection[str] = (),
) -> S3Request:
    """``request`` without some headers or query parameters, signed again.

    The body is unchanged, so the client's ``x-amz-content-sha256`` (a hash,
    ``UNSIGNED-PAYLOAD`` or a streaming-trailer marker) still describes it and
    is kept. The region comes from the client's credential scope when there is
    one. Chunk-signed bodies (``STREAMING-AWS4-HMAC-SHA256-PAYLOAD``) chain each
    chunk's signature to the header's, so they cannot be re-signed here.
    """
    drop_h = {h.lower() for h in drop_headers}
    drop_q = set(drop_query)
    headers = [(k, v) for k, v in request.headers if k.lower() not in drop_h]
    pairs = [
        p for p in request.raw_query.split("&") if p and unquote(p.partition("=")[0]) not in drop_q
    ]
    target = request.path + ("?" + "&".join(pairs) if pairs else "")
    authorization = request.header("Authorization") or ""
    if not authorization.startswith("AWS4-HMAC-SHA256"):
        # Unsigned (or presigned: nothing in the headers to fix) requests pass as they are.
        return S3Request.build(request.method, target, headers, request.body, request.wire_body)
    if credentials is None:
        raise ProxyError("re-signing a request needs credentials; give them to S3Proxy")
    payload_hash = request.header("x-amz-content-sha256")
    if payload_hash and payload_hash.startswith(_CHUNK_SIGNED):
        raise ProxyError(f"cannot re-sign a chunk-signed body ({payload_hash})")
    fields = _authorization_fields(authorization)
    scope = fields.get("Credential", "").split("/")
    if len(scope) == 5 and scope[0] != credentials.access_key:
        log.warning(
            "re-signing a request signed by %s with %s's key", scope[0], credentials.access_key
        )
    signed = set(fields.get("SignedHeaders", "").split(";")) - drop_h - {""}
    signer = _Resigner(
        credentials, scope[2] if len(scope) == 5 else region, payload_hash, signed or None
    )
    aws = AWSRequest(
        method=request.method,
        url=f"http://{request.header('Host') or 'localhost'}{target}",
        data=request.body,
    )
    for name, value in headers:
        if name.lower() not in ("authorization", "x-amz-date"):
            aws.headers[name] = value
    signer.add_auth(aws)
    return S3Request.build(
        request.method, target, list(aws.headers.items()), request.body, request.wire_body
    )


# -- the S3 XML the quirks edit ----------------------------------------------------


class _Xml:
    """An S3 response document, edited in place and written back in its own namespace."""

    def __init__(self, body: bytes) -> None:
        self.root = ET.fromstring(body)
        self.ns = self.root.tag[1:].split("}", 1)[0] if self.root.tag.startswith("{") else ""

    def _q(self, tag: str) -> str:
        return f"{{{self.ns}}}{tag}" if self.ns else tag

    def text(self, tag: str) -> str | None:
        el = self.root.find(self._q(tag))
        return None if el is None else (el.text or "")

    def set_text(self, tag: str, value: str) -> None:
        el = self.root.find(self._q(tag))
        if el is not None:
            el.text = value

    def remove(self, *tags: str) -> None:
        for tag in tags:
            for el in self.root.findall(self._q(tag)):
                self.root.remove(el)

    def children(self, tag: str) -> list[ET.Element]:
        return self.root.findall(self._q(tag))

    def child_text(self, el: ET.Element, tag: str) -> str:
        found = el.find(self._q(tag))
        return "" if found is None else (found.text or "")

    def replace_children(self, tag: str, new: list[ET.Element]) -> None:
        """Put ``new`` where the ``tag`` children were (at the end if there were none)."""
        old = self.children(tag)
        index = list(self.root).index(old[0]) if old else len(self.root)
        for el in old:
            self.root.remove(el)
        for offset, el in enumerate(new):
            self.root.insert(index + offset, el)

    def truncated(self) -> bool:
        return (self.text("IsTruncated") or "").strip().lower() == "true"

    def to_bytes(self) -> bytes:
        # Without default_namespace ElementTree writes "ns0:" prefixes; S3 does not.
        return ET.tostring(
            self.root, encoding="UTF-8", xml_declaration=True, default_namespace=self.ns or None
        )


# -- fault rules -----------------------------------------------------------------


@dataclass(eq=False)
class Rule:
    """Fires on the ``nth`` request of ``op`` whose names contain ``key_contains``
    (and on the ``times - 1`` such requests after it; ``times=None``: every one)."""

    op: str
    action: str
    key_contains: str | None = None
    nth: int = 1
    times: int | None = 1
    status: int = 500
    code: str = "InternalError"
    seconds: float = 0.0
    when: Callable[[S3Request], bool] | None = None
    seen: int = 0
    fired: int = 0
    # "hold": set once a request is held; the gate opens at release, and
    # ``forward`` says whether the held requests then go on or are dropped.
    arrived: threading.Event = field(default_factory=threading.Event)
    gate: threading.Event = field(default_factory=threading.Event)
    forward: bool = True

    def matches(self, request: S3Request) -> bool:
        if self.op not in ("*", request.op):
            return False
        if self.key_contains is not None and not any(
            self.key_contains in name for name in request.names()
        ):
            return False
        return self.when is None or bool(self.when(request))

    def due(self) -> bool:
        """Count one matching request; True if the rule fires on it (lock held by caller)."""
        self.seen += 1
        return self.seen >= self.nth and (self.times is None or self.fired < self.times)


@dataclass(frozen=True)
class _Fault:
    action: str
    status: int = 500
    code: str = "InternalError"
    seconds: float = 0.0
    rule: Rule | None = None


@dataclass
class _Chaos:
    rate: float
    rng: random.Random
    actions: tuple[str, ...]
    seconds: float


# -- the upstream side -------------------------------------------------------------


class _Upstream:
    """One keep-alive connection to the S3 server, owned by one client connection."""

    def __init__(
        self, host: str, port: int, timeout: float, on_connect: Callable[[], None]
    ) -> None:
        self._host, self._port, self._timeout = host, port, timeout
        self._on_connect = on_connect
        self._conn: http.client.HTTPConnection | None = None

    def exchange(self, request: S3Request) -> Response:
        """Send ``request`` and read the whole response.

        A kept-alive connection can be closed by the server between two requests;
        that failure is the connection's, not the request's, so the request is sent
        once more on a new connection. (If the server closed it just after taking
        the request, that is a second execution; idle closes are caught before
        sending, which leaves a window of microseconds on loopback.)
        """
        conn, reused = self._connection()
        try:
            return self._exchange_once(conn, request)
        except TimeoutError:
            self.close()
            raise
        except (OSError, http.client.HTTPException):
            self.close()
            if not reused:
                raise
            log.debug("upstream closed a kept-alive connection; sending again")
        conn, _ = self._connection()
        try:
            return self._exchange_once(conn, request)
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """The open connection and True, or a new one and False."""
        if self._conn is not None and not dropped(self._conn):
            return self._conn, True
        self.close()
        self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        self._on_connect()
        return self._conn, False

    def _exchange_once(self, conn: http.client.HTTPConnection, request: S3Request) -> Response:
        conn.putrequest(request.method, request.target, skip_host=True, skip_accept_encoding=True)
        for name, value in request.headers:
            conn.putheader(name, value)
        # wire_body keeps the client's framing: chunked stays chunked, as the
        # headers (forwarded as they are) announce.
        conn.endheaders(request.wire_body or None)
        response = conn.getresponse()
        body = response.read()
        if response.will_close:
            self.close()
        return Response(response.status, response.reason, tuple(response.getheaders()), body)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


# -- the client side ---------------------------------------------------------------


@dataclass(frozen=True)
class _Outcome:
    response: Response | None = None
    drop: str = ""  # "reset" (RST) or "close" (FIN, response lost)
    cut: bool = False  # the response's head and half its body, then FIN


def _read_chunked(rfile: io.BufferedIOBase) -> tuple[bytes, bytes]:
    """(decoded body, the bytes as framed) of a chunked request body."""
    decoded: list[bytes] = []
    wire: list[bytes] = []
    while True:
        line = rfile.readline(65537)
        wire.append(line)
        if not line:
            raise ConnectionError("client closed inside a chunked body")
        size = int(line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            break
        data = rfile.read(size + 2)
        if len(data) < size + 2:
            raise ConnectionError("client closed inside a chunk")
        wire.append(data)
        decoded.append(data[:size])
    while True:  # trailer fields, up to the empty line
        line = rfile.readline(65537)
        wire.append(line)
        if line in (b"\r\n", b"\n", b""):
            break
    return b"".join(decoded), b"".join(wire)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go in one write, but a small response after a small
        # request would still wait on delayed ACKs without this.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.track(self.connection)
        proxy = self.server.proxy
        proxy._connected("client")
        self._upstream = _Upstream(
            proxy.upstream_host,
            proxy.upstream_port,
            proxy.upstream_timeout,
            lambda: proxy._connected("upstream"),
        )

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self._upstream.close()
            self.server.untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        log.debug("%s " + format, self.address_string(), *args)

    def _serve(self) -> None:
        try:
            body, wire = self._read_body()
        except (OSError, ValueError) as exc:
            log.debug("bad or cut request body: %s", exc)
            self.close_connection = True
            return
        request = S3Request.build(self.command, self.path, self.headers.items(), body, wire)
        outcome = self.server.proxy._serve_request(request, self._upstream)
        if outcome.drop:
            self._drop(outcome.drop)
        elif outcome.response is not None:
            self._send(outcome.response, request.method == "HEAD", outcome.cut)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_OPTIONS = _serve

    def _read_body(self) -> tuple[bytes, bytes]:
        encoding = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in encoding:
            return _read_chunked(self.rfile)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            raise ConnectionError("client closed inside the body")
        return body, body

    def _drop(self, how: str) -> None:
        self.close_connection = True
        if how == "reset":
            # Linger 0: close() sends RST, as a dying load balancer would.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.server.resets.add(self.connection)

    def _send(self, response: Response, head: bool, cut: bool = False) -> None:
        lines = [f"HTTP/1.1 {response.status} {response.reason}"]
        lines += [f"{name}: {value}" for name, value in response.headers]
        framing = {
            k.lower(): v.lower()
            for k, v in response.headers
            if k.lower() in ("transfer-encoding", "content-length", "connection")
        }
        body = b""
        if not head and response.status not in _NO_BODY_STATUS and response.status >= 200:
            body = response.body
            if "chunked" in framing.get("transfer-encoding", ""):
                # http.client undid the server's chunking; frame the body again.
                body = (
                    f"{len(body):X}\r\n".encode() + body + b"\r\n" if body else b""
                ) + b"0\r\n\r\n"
            elif "content-length" not in framing:
                self.close_connection = True  # the body ends where the connection does
        if "close" in framing.get("connection", ""):
            self.close_connection = True
        head_bytes = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if cut:  # the head as sent, the body cut half-way: the reader meets its end early
            body, self.close_connection = body[: len(body) // 2], True
        try:
            self.wfile.write(head_bytes + body)
        except OSError as exc:  # the client gave up (a read timeout, say)
            log.debug("client went away before its response: %s", exc)
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Sixty-four pooled clients connect at once; the default backlog of 5 would
    # drop SYNs and cost each late one a second.
    request_queue_size = 256

    def __init__(self, proxy: S3Proxy) -> None:
        self.proxy = proxy
        self.resets: set[socket.socket] = set()
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def track(self, sock: socket.socket) -> None:
        with self._open_lock:
            self._open.add(sock)

    def untrack(self, sock: socket.socket) -> None:
        with self._open_lock:
            self._open.discard(sock)

    def close_clients(self) -> None:
        """End every client connection, so handler threads blocked reading exit."""
        with self._open_lock:
            socks = list(self._open)
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def shutdown_request(self, request: Any) -> None:
        if request in self.resets:
            self.resets.discard(request)
            self.close_request(request)  # no FIN first: the close is the RST
            return
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients vanish mid-request on purpose here: quiet about that, not about bugs.
        if isinstance(sys.exc_info()[1], OSError):
            log.debug("connection from %s failed", client_address, exc_info=True)
        else:
            log.exception("the S3 proxy failed serving %s", client_address)


# -- the proxy ---------------------------------------------------------------------


class S3Proxy(StartStop):
    """A fault-injecting, quirk-emulating HTTP/1.1 proxy in front of one S3 server.

    Thread-safe: rules, chaos and quirks may change while clients are busy.
    """

    def __init__(
        self,
        upstream_url: str,
        access_key: str | None = None,
        secret_key: str | None = None,
        region: str = "us-east-1",
        *,
        upstream_timeout: float = 300.0,
    ) -> None:
        parts = urlsplit(upstream_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"upstream must be an http:// URL, not {upstream_url!r}")
        self.upstream_url = upstream_url
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port or 80
        self.upstream_timeout = upstream_timeout
        self.region = region
        self._credentials = (
            Credentials(access_key, secret_key) if access_key and secret_key else None
        )
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._forwarded: Counter[str] = Counter()
        self._rules: list[Rule] = []
        self._chaos: _Chaos | None = None
        self._chaos_fired: Counter[str] = Counter()
        self._connections: Counter[str] = Counter()
        self._quirks: frozenset[str] = frozenset()
        self._completed: set[str] = set()  # upload ids seen completed
        self._conflicted: set[tuple[str, str]] = set()  # keys already given their 409
        self._shuffle = random.Random(0)
        # Benchmark measurements, off unless asked for (see the module's documentation).
        self.measure_copies = False
        self._copied: Counter[str] = Counter()
        self._arrivals: list[tuple[float, str]] | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle ------------------------------------------------------------
    @property
    def endpoint_url(self) -> str:
        if self._server is None:
            raise ProxyError("the proxy is not running")
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def start(self) -> Self:
        if self._server is None:
            self._server = _Server(self)
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.1},
                name="s3proxy",
                daemon=True,
            )
            self._thread.start()
            log.info("S3 proxy %s -> %s", self.endpoint_url, self.upstream_url)
        return self

    def stop(self) -> None:
        self.clear()  # requests still held would keep their handler threads waiting
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.close_clients()
            server.server_close()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    # -- counts ----------------------------------------------------------------
    @property
    def counts(self) -> Counter[str]:
        """Requests received, by operation (a copy)."""
        with self._lock:
            return Counter(self._counts)

    @property
    def forwarded(self) -> Counter[str]:
        """Requests sent to the upstream, by operation (a copy)."""
        with self._lock:
            return Counter(self._forwarded)

    @property
    def chaos_fired(self) -> Counter[str]:
        """Chaos faults injected, by chaos action name (a copy)."""
        with self._lock:
            return Counter(self._chaos_fired)

    @property
    def connections(self) -> Counter[str]:
        """Connections opened: "client" (accepted) and "upstream" (made); keep-alive
        keeps both at the size of the client's pool."""
        with self._lock:
            return Counter(self._connections)

    def _connected(self, side: str) -> None:
        with self._lock:
            self._connections[side] += 1

    def reset_counts(self) -> None:
        with self._lock:
            self._counts.clear()
            self._forwarded.clear()
            self._chaos_fired.clear()
            self._connections.clear()
            self._copied.clear()
            if self._arrivals is not None:
                self._arrivals = []

    @property
    def copied_bytes(self) -> Counter[str]:
        """Bytes copied inside the store by successful copies, by operation (a
        copy), when ``measure_copies`` is on."""
        with self._lock:
            return Counter(self._copied)

    def record_arrivals(self, on: bool = True) -> None:
        """Keep (or stop keeping) the arrival time and operation of every request."""
        with self._lock:
            self._arrivals = [] if on else None

    @property
    def arrivals(self) -> list[tuple[float, str]]:
        """(seconds since the epoch, operation) of each request received since the
        counts were last reset, in arrival order (a copy)."""
        with self._lock:
            return list(self._arrivals or ())

    # -- faults ----------------------------------------------------------------
    def add(
        self,
        op: str,
        action: str,
        *,
        key_contains: str | None = None,
        nth: int = 1,
        times: int | None = 1,
        status: int = 500,
        code: str = "InternalError",
        seconds: float = 0.0,
        when: Callable[[S3Request], bool] | None = None,
    ) -> Rule:
        """Inject ``action`` into requests of ``op`` ("*": any); see :class:`Rule`."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; one of {sorted(ACTIONS)}")
        if op != "*" and op not in s3_operations():
            # A misspelt operation would never fire and the test would pass for nothing.
            raise ValueError(f"{op!r} is not an S3 operation botocore knows")
        if nth < 1:
            raise ValueError("nth counts from 1")
        rule = Rule(op, action, key_contains, nth, times, status, code, seconds, when)
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove(self, rule: Rule) -> None:
        with self._lock:
            if rule in self._rules:
                self._rules.remove(rule)

    def release(self, rule: Rule, *, forward: bool = True) -> None:
        """Remove a ``hold`` rule and let the requests it holds go on to the store
        (``forward``) or drop them unanswered, as a client killed while they were
        in flight would never have sent them."""
        self.remove(rule)
        rule.forward = forward
        rule.gate.set()

    def clear(self) -> None:
        """Remove every rule and stop chaos (quirks stay as they are); requests
        held by a ``hold`` rule are dropped."""
        with self._lock:
            rules, self._rules = self._rules, []
            self._chaos = None
        for rule in rules:
            if rule.action == "hold":
                rule.forward = False
                rule.gate.set()

    def chaos(
        self,
        rate: float,
        seed: int = 0,
        actions: Iterable[str] = CHAOS_ACTIONS,
        seconds: float = 0.05,
    ) -> None:
        """A random fault on a fraction ``rate`` of requests (0 stops it). ``delay``
        waits ``seconds``. Rules take precedence over chaos."""
        names = tuple(actions)
        unknown = set(names) - set(CHAOS)
        if unknown:
            raise ValueError(f"unknown chaos actions {sorted(unknown)}; one of {sorted(CHAOS)}")
        with self._lock:
            self._chaos = _Chaos(rate, random.Random(seed), names, seconds) if rate > 0 else None

    # -- quirks ----------------------------------------------------------------
    @property
    def quirks(self) -> frozenset[str]:
        return self._quirks

    @quirks.setter
    def quirks(self, names: Iterable[str]) -> None:
        new = frozenset(names)
        unknown = new - QUIRKS
        if unknown:
            raise ValueError(f"unknown quirks {sorted(unknown)}; one of {sorted(QUIRKS)}")
        with self._lock:
            if "aws_conflict_409" in new - self._quirks:
                self._conflicted.clear()  # each key gets its first 409 again
            self._quirks = new

    def enable(self, *names: str) -> None:
        self.quirks = self._quirks | set(names)

    def disable(self, *names: str) -> None:
        self.quirks = self._quirks - set(names)

    # -- serving ---------------------------------------------------------------
    def _serve_request(self, request: S3Request, upstream: _Upstream) -> _Outcome:
        """Decide and do what happens to one request."""
        with self._lock:
            self._counts[request.op] += 1
            if self._arrivals is not None:
                self._arrivals.append((time.time(), request.op))
        fault = self._fault_for(request)
        log.debug("%s %s/%s fault=%s", request.op, request.bucket, request.key, fault)
        if fault is not None and fault.action == "error":
            return _Outcome(error_response(fault.status, fault.code, request))
        if fault is not None and fault.action == "reset":
            return _Outcome(drop="reset")
        if fault is not None and fault.action == "hold" and not self._hold(fault):
            return _Outcome(drop="close")
        early = self._quirk_answer(request)
        if early is not None:
            return _Outcome(early)
        if fault is not None and fault.action == "delay":
            time.sleep(fault.seconds)
        response = self._forward(request, upstream)
        if fault is not None and fault.action == "lose":
            return _Outcome(drop="close")
        if fault is not None and fault.action == "error_after":
            return _Outcome(error_response(fault.status, fault.code, request))
        if fault is not None and fault.action == "cut":
            return _Outcome(response, cut=True)
        return _Outcome(response)

    def _hold(self, fault: _Fault) -> bool:
        """Keep a request waiting until its rule is released (or ``seconds`` pass,
        if given); True if it is then to be forwarded."""
        rule = fault.rule
        assert rule is not None
        rule.arrived.set()
        released = rule.gate.wait(fault.seconds or None)
        return released and rule.forward

    def _fault_for(self, request: S3Request) -> _Fault | None:
        with self._lock:
            rules = list(self._rules)
        matching = [rule for rule in rules if rule.matches(request)]
        fired: Rule | None = None
        with self._lock:
            for rule in matching:  # every matching rule counts the request; the first due fires
                if rule.due() and fired is None:
                    rule.fired += 1
                    fired = rule
            if fired is not None:
                return _Fault(fired.action, fired.status, fired.code, fired.seconds, fired)
            return self._chaos_fault()

    def _chaos_fault(self) -> _Fault | None:
        """A random fault, or None (lock held)."""
        chaos = self._chaos
        if chaos is None or chaos.rng.random() >= chaos.rate:
            return None
        name = chaos.rng.choice(chaos.actions)
        self._chaos_fired[name] += 1
        action, status, code = CHAOS[name]
        return _Fault(action, status, code, chaos.seconds)

    def _quirk_answer(self, request: S3Request) -> Response | None:
        """The answer a quirky store gives without the request reaching it, if any."""
        quirks = self._quirks
        if "minio_recomplete" in quirks and request.op == "CompleteMultipartUpload":
            with self._lock:
                completed = request.param("uploadId") in self._completed
            if completed:
                return error_response(404, "NoSuchUpload", request)
        if (
            "ceph_quoted_if_match" in quirks
            and request.op == "PutObject"
            and (request.header("If-Match") or "").startswith('"')
        ):
            # Ceph RGW 16 compares If-Match with the ETag it stores, unquoted, so
            # an ETag quoted as S3 returns it never matches.
            return error_response(412, "PreconditionFailed", request)
        if (
            "aws_conflict_409" in quirks
            and request.op == "PutObject"
            and any(request.header(h) is not None for h in _PRECONDITIONS)
        ):
            with self._lock:
                first = (request.bucket, request.key) not in self._conflicted
                self._conflicted.add((request.bucket, request.key))
            if first:
                return error_response(409, "ConditionalRequestConflict", request)
        return None

    def _forward(self, request: S3Request, upstream: _Upstream) -> Response:
        try:
            refused = self._racy_check(request, upstream)
            if refused is not None:
                return refused
            outbound = self._rewrite(request)
        except ProxyError as exc:
            log.error("cannot apply a quirk to %s: %s", request.op, exc)
            return error_response(500, "InternalError", request, f"test proxy: {exc}")
        try:
            response = upstream.exchange(outbound)
        except (OSError, http.client.HTTPException) as exc:
            log.warning("upstream failed on %s %s: %s", request.op, request.target, exc)
            return error_response(502, "BadGateway", request)
        with self._lock:
            self._forwarded[request.op] += 1
        self._observe(request, response)
        if self.measure_copies and request.op in _COPIES:
            self._measure_copy(request, response, upstream)
        return self._quirk_response(request, response)

    def _measure_copy(self, request: S3Request, response: Response, upstream: _Upstream) -> None:
        """Add what a successful copy moved: an UploadPartCopy's source range, else
        the size of the object copied, read by a HEAD of the copy (CopyObject) or
        of its whole source (UploadPartCopy), before the client hears back, so that
        a rename's delete cannot come first. A copy can fail with status 200 and
        an error document: S3 sends the status before the copy ends."""
        if response.status != 200 or b"<Error>" in response.body:
            return
        size = _range_size(request.header("x-amz-copy-source-range"))
        if size is None:
            source = (request.header("x-amz-copy-source") or "").split("?", 1)[0]
            path = request.path if request.op == "CopyObject" else "/" + source.lstrip("/")
            try:
                head = upstream.exchange(self._signed_head(request, path))
            except (OSError, http.client.HTTPException, ProxyError) as exc:
                log.warning("could not size a copy to %s: %s", request.path, exc)
                return
            size = int(head.header("Content-Length") or 0) if head.status == 200 else 0
        with self._lock:
            self._copied[request.op] += size

    def _racy_condition(self, request: S3Request) -> str | None:
        """The precondition header a racy quirk checks apart from the write, if any."""
        if request.op != "PutObject":
            return None
        for header in _PRECONDITIONS:
            if f"racy_{header.replace('-', '_')}" in self._quirks and request.header(header):
                return header
        return None

    def _racy_check(self, request: S3Request, upstream: _Upstream) -> Response | None:
        """A store without a lock: check the condition by a HEAD, wait, and let the
        write through unconditionally (see :meth:`_rewrite`). A 412 if the check fails."""
        header = self._racy_condition(request)
        if header is None:
            return None
        head = upstream.exchange(self._signed_head(request))
        if head.status not in (200, 404):
            return error_response(502, "BadGateway", request)
        if header == "if-none-match":
            holds = head.status == 404
        else:
            etag = (head.header("ETag") or "").strip('"')
            holds = head.status == 200 and etag == (request.header(header) or "").strip('"')
        if not holds:
            return error_response(412, "PreconditionFailed", request)
        time.sleep(RACE_WINDOW)
        return None

    def _signed_head(self, request: S3Request, path: str | None = None) -> S3Request:
        """A HEAD of ``request``'s object (or of ``path``, percent-encoded as on the
        wire), signed as the client signed it."""
        credentials = self._signing_credentials()
        if credentials is None:
            raise ProxyError("a HEAD of the proxy's own needs credentials; give them to S3Proxy")
        path = path or request.path
        scope = _authorization_fields(request.header("Authorization") or "")
        parts = scope.get("Credential", "").split("/")
        host = request.header("Host") or "localhost"
        aws = AWSRequest(method="HEAD", url=f"http://{host}{path}")
        aws.headers["Host"] = host
        _Resigner(credentials, parts[2] if len(parts) == 5 else self.region, None, None).add_auth(
            aws
        )
        return S3Request.build("HEAD", path, list(aws.headers.items()))

    def _rewrite(self, request: S3Request) -> S3Request:
        """The request as the upstream should get it under the current quirks."""
        quirks = self._quirks
        racy = self._racy_condition(request)
        if racy is not None:  # checked apart by _racy_check; written without a condition
            return rewrite_request(
                request, self._signing_credentials(), self.region, drop_headers=(racy,)
            )
        if (
            "no_preconditions" in quirks
            and request.op in ("PutObject", "CompleteMultipartUpload")
            and any(request.header(h) is not None for h in _PRECONDITIONS)
        ):
            return rewrite_request(
                request, self._signing_credentials(), self.region, drop_headers=_PRECONDITIONS
            )
        if (
            "minio_upload_prefix" in quirks
            and request.op == "ListMultipartUploads"
            and any(p in request.query for p in _UPLOAD_PAGING)
        ):
            # MinIO ignores paging, so ask for everything and filter that.
            return rewrite_request(
                request, self._signing_credentials(), self.region, drop_query=_UPLOAD_PAGING
            )
        return request

    def _signing_credentials(self) -> Credentials | None:
        if self._credentials is None:  # boto3's standard chain, then
            found = botocore.session.get_session().get_credentials()
            self._credentials = found.get_frozen_credentials() if found else None
        return self._credentials

    def _observe(self, request: S3Request, response: Response) -> None:
        """Remember what later quirks need: which uploads were completed."""
        if (
            request.op == "CompleteMultipartUpload"
            and response.status == 200
            and b"<CompleteMultipartUploadResult" in response.body
        ):
            with self._lock:
                self._completed.add(request.param("uploadId") or "")

    def _quirk_response(self, request: S3Request, response: Response) -> Response:
        quirks = self._quirks
        if response.status != 200 or not quirks:
            return response
        if request.op == "ListMultipartUploads" and quirks & {
            "minio_upload_prefix",
            "truncated_without_marker",
            "unsorted_uploads",
        }:
            return response.with_body(self._edit_upload_listing(request, response.body))
        if request.op == "ListObjectsV2" and "truncated_without_marker" in quirks:
            doc = _Xml(response.body)
            if doc.truncated():
                doc.remove("NextContinuationToken")
                return response.with_body(doc.to_bytes())
        return response

    def _edit_upload_listing(self, request: S3Request, body: bytes) -> bytes:
        quirks = self._quirks
        doc = _Xml(body)
        uploads = doc.children("Upload")
        if "minio_upload_prefix" in quirks:
            # A non-empty prefix is one exact key; no paging at all.
            prefix = request.param("prefix") or ""
            if prefix:
                uploads = [u for u in uploads if doc.child_text(u, "Key") == prefix]
            doc.set_text("IsTruncated", "false")
            doc.remove("NextKeyMarker", "NextUploadIdMarker")
        if "unsorted_uploads" in quirks and len(uploads) > 1:
            shuffled = list(uploads)
            with self._lock:
                self._shuffle.shuffle(shuffled)
            if shuffled == uploads:
                shuffled.reverse()  # out of order every time, not by luck
            uploads = shuffled
        if "truncated_without_marker" in quirks and doc.truncated():
            doc.remove("NextKeyMarker", "NextUploadIdMarker")
        doc.replace_children("Upload", uploads)
        return doc.to_bytes()


def proxy_for(server: Any, **kwargs: Any) -> S3Proxy:
    """A proxy (not yet started: use it in a ``with``) in front of ``server``: an
    ``EmbeddedS3``, anything else with ``endpoint_url`` (and ``access_key`` /
    ``secret_key`` if it checks signatures), or an endpoint URL."""
    if isinstance(server, str):
        return S3Proxy(server, **kwargs)
    return S3Proxy(
        server.endpoint_url,
        getattr(server, "access_key", None),
        getattr(server, "secret_key", None),
        **kwargs,
    )
