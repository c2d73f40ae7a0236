"""A light S3 client: the store's calls signed as botocore signs them, over connections of its own.

Every step makes a store, and a botocore client costs a fresh process its S3
model and its session and client machinery (some tens of milliseconds of CPU,
at each of Spark's driver-side steps, in each task's worker, at each command),
and each request some twenty event handlers, endpoint rules, a validator, a
serializer and a parser: about three times this client's CPU a request.
:class:`LightClient` answers the calls :class:`~zero_rename.core.s3.client.S3Store`
makes with the same arguments and the same shapes botocore would (a dict per
answer, ``ClientError`` for an S3 error, ``BotoCoreError`` for no answer), so
the store layer and everything above it runs unchanged; the requests are
signed as botocore's ``S3SigV4Auth`` signs them (:mod:`.sigv4`) and sent over
a pool of its own (:class:`~zero_rename.core.s3.signing.SignedPool`), retried as
botocore's standard mode retries (:func:`zero_rename.core.s3.completers.retry_scale`).

It is used only where it reaches the store exactly where botocore would
(:func:`light_client_unsupported`): an http(s) endpoint given in the
configuration, path-style addressing, no proxy, no AWS config file (which may
set what botocore alone reads: a region, an addressing style, a CA bundle), no
FIPS or dual-stack setting, ``request_path`` not ``botocore``. Credentials come
from the environment where a whole static set is there (the first source of
botocore's chain), else from botocore's chain itself. Its ``meta.events``
(:mod:`.events`) emits ``before-parameter-build``, ``before-call``,
``before-send`` and ``after-call`` as botocore's does, for whoever counts or
fails requests through them. A call it does not make itself (a bucket's
lifecycle rules, the presigned URLs of the streamed upload listing) goes to a
botocore client made on first need, whose events are emitted on this client's
as well.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, unquote_plus, urlencode, urlsplit
from xml.sax.saxutils import escape

from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    HTTPClientError,
    NoCredentialsError,
    SSLError,
)

from zero_rename.core.s3.backoff import backoff
from zero_rename.core.s3.client import StoreConfig, environment_endpoint
from zero_rename.core.s3.events import Events
from zero_rename.core.s3.http import (
    aws_config_file,
    child_text,
    direct_unsupported,
    local_name,
    parse_xml,
)
from zero_rename.core.s3.transport import NotConnected, TlsRefused, TransportError

log = logging.getLogger(__name__)

_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
_MAX_BACKOFF = 20.0
_FLAGS = ("AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT")
# The events this client emits around each call, as botocore's client does.
_EVENTS = ("before-parameter-build", "before-call", "before-send", "after-call")


def light_client_unsupported(config: StoreConfig) -> str | None:
    """Why a botocore client could send elsewhere or otherwise than the light
    client would, for ``config``; None when the light client sends the same."""
    if config.request_path == "botocore":
        return "request_path is botocore"
    if config.endpoint_url is None:
        return (
            "no endpoint is configured (botocore resolves AWS's regional addresses)"
            if environment_endpoint() is None
            else "the endpoint comes from the environment"
        )
    if config.path_style is False:
        return "virtual-hosted addressing is configured"
    if urlsplit(config.endpoint_url).path not in ("", "/"):
        return "the endpoint has a path"
    if aws_config_file() is not None:
        return "an AWS config file may set what botocore alone reads"
    if any(os.environ.get(flag, "").lower() == "true" for flag in _FLAGS):
        return "a FIPS or dual-stack endpoint is asked for"
    return direct_unsupported(config.endpoint_url)


@dataclass(frozen=True)
class _Config:
    """The part of botocore's client config that the store layer reads."""

    max_pool_connections: int
    connect_timeout: float
    read_timeout: float
    retries: Mapping[str, Any]
    s3: Mapping[str, Any]


@dataclass(frozen=True)
class _Meta:
    endpoint_url: str
    region_name: str
    config: _Config
    events: Events


class _Body:
    """A GetObject answer's body, read already (records and manifests are small)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self) -> bytes:
        data, self._data = self._data, b""
        return data

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class _Request:
    method: str
    key: str | None  # None: the bucket itself
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes = b""


Parse = Callable[[int, Mapping[str, str], ET.Element | None], dict[str, Any]]


class LightClient:
    """The S3 calls of :class:`~zero_rename.core.s3.client.S3Store`, without botocore's
    client; thread-safe. See the module's documentation."""

    def __init__(
        self, config: StoreConfig, region: str | None = None, credentials: Any = None
    ) -> None:
        """``credentials``: a set of its own (an access key, its secret and a
        session token, as :class:`~.sigv4.StaticCredentials` or botocore's hold
        them); by default boto3's standard chain's, as botocore's client finds them."""
        from zero_rename.core.s3.completers import LightTarget
        from zero_rename.core.s3.signing import SignedPool

        assert config.endpoint_url is not None
        self.config = config
        self._fallback: Any = None
        self._fallback_lock = threading.Lock()
        region = region or config.region or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        self.origin = config.endpoint_url.rstrip("/")
        self.target = LightTarget(self.origin, "", region)
        self.requests = SignedPool(config, self.origin, region, credentials)
        self._own_credentials = credentials is not None
        self.max_attempts = config.max_attempts
        self.meta = _Meta(
            config.endpoint_url,
            region,
            _Config(
                config.max_pool_connections,
                config.connect_timeout,
                config.read_timeout,
                {"mode": "standard", "total_max_attempts": config.max_attempts},
                {"addressing_style": "path"},  # light_client_unsupported: never virtual
            ),
            Events(),
        )

    def light_target(self, bucket: str) -> Any:
        """Where job commit's light completes go (:class:`~.completers.LightTarget`)."""
        return type(self.target)(self.origin, "/" + quote(bucket, safe=""), self.meta.region_name)

    def _get_credentials(self) -> Any:
        """The credentials this client signs with, as botocore's client names
        the method (the table formats' libraries are given them); None for none."""
        try:
            return self.requests.credentials
        except NoCredentialsError:
            return None

    def close(self) -> None:
        self.requests.close()
        if self._fallback is not None:
            self._fallback.close()

    def __getattr__(self, name: str) -> Any:
        """What this client does not do itself (a call the store layer makes that
        is not among these, a presigned URL for the streamed upload listing) is
        botocore's client's, made on first need: slower, never wrong."""
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._botocore(), name)

    def _botocore(self) -> Any:
        from zero_rename.core.s3.client import make_client

        with self._fallback_lock:
            if self._fallback is None:
                log.info("the light client hands a call to botocore's client")
                fallback = make_client(self.config, self._session())
                for stage in _EVENTS:
                    fallback.meta.events.register(f"{stage}.s3", self._forward)
                self._fallback = fallback
            return self._fallback

    def _session(self) -> Any:
        """A botocore session for the fallback client: with this client's own
        credentials where it was given some, else boto3's chain's (None)."""
        if not self._own_credentials:
            return None
        from zero_rename.core.s3.client import botocore_session

        session = botocore_session()
        frozen = self.requests.credentials.get_frozen_credentials()
        session.set_credentials(frozen.access_key, frozen.secret_key, frozen.token)
        return session

    def _forward(self, event_name: str, **kwargs: Any) -> Any:
        """botocore's client's event, emitted on this client's events too: a hook
        on this client sees every call, whichever client sends it."""
        for _handler, response in self.meta.events.emit(event_name, **kwargs):
            if response is not None:
                return response
        return None

    # -- the calls ------------------------------------------------------------
    def head_bucket(self, *, Bucket: str) -> dict[str, Any]:
        return self._call("HeadBucket", Bucket, _Request("HEAD", None, {}, {}), _nothing, {})

    def create_multipart_upload(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        request = _Request("POST", Key, {"uploads": ""}, {})
        return self._call(
            "CreateMultipartUpload", Bucket, request, _fields(UploadId="UploadId"), {"Key": Key}
        )

    def upload_part(
        self, *, Bucket: str, Key: str, UploadId: str, PartNumber: int, Body: bytes
    ) -> dict[str, Any]:
        query = {"partNumber": str(PartNumber), "uploadId": UploadId}
        request = _Request("PUT", Key, query, {}, bytes(Body))
        return self._call("UploadPart", Bucket, request, _etag_header, {"Key": Key})

    def complete_multipart_upload(
        self,
        *,
        Bucket: str,
        Key: str,
        UploadId: str,
        MultipartUpload: Mapping[str, Any],
        IfNoneMatch: str | None = None,
    ) -> dict[str, Any]:
        from zero_rename.core.s3.completers import request_body

        parts = [(int(p["PartNumber"]), str(p["ETag"])) for p in MultipartUpload["Parts"]]
        headers = {"If-None-Match": IfNoneMatch} if IfNoneMatch else {}
        request = _Request("POST", Key, {"uploadId": UploadId}, headers, request_body(parts))
        return self._call(
            "CompleteMultipartUpload", Bucket, request, _fields(ETag="ETag"), {"Key": Key}
        )

    def abort_multipart_upload(self, *, Bucket: str, Key: str, UploadId: str) -> dict[str, Any]:
        request = _Request("DELETE", Key, {"uploadId": UploadId}, {})
        return self._call("AbortMultipartUpload", Bucket, request, _nothing, {"Key": Key})

    def list_parts(
        self, *, Bucket: str, Key: str, UploadId: str, PartNumberMarker: int = 0
    ) -> dict[str, Any]:
        query = {"uploadId": UploadId, "part-number-marker": str(PartNumberMarker)}
        request = _Request("GET", Key, query, {})
        return self._call("ListParts", Bucket, request, _parts, {"Key": Key})

    def list_multipart_uploads(self, *, Bucket: str, **more: Any) -> dict[str, Any]:
        names = {
            "Prefix": "prefix",
            "MaxUploads": "max-uploads",
            "KeyMarker": "key-marker",
            "UploadIdMarker": "upload-id-marker",
        }
        query = {"uploads": "", **{names[k]: str(v) for k, v in more.items()}}
        request = _Request("GET", None, query, {})
        return self._call("ListMultipartUploads", Bucket, request, _uploads, more)

    def put_object(
        self,
        *,
        Bucket: str,
        Key: str,
        Body: bytes,
        ContentType: str | None = None,
        IfNoneMatch: str | None = None,
        IfMatch: str | None = None,
    ) -> dict[str, Any]:
        given = {"Content-Type": ContentType, "If-None-Match": IfNoneMatch, "If-Match": IfMatch}
        headers = {k: v for k, v in given.items() if v is not None}
        request = _Request("PUT", Key, {}, headers, bytes(Body))
        return self._call("PutObject", Bucket, request, _etag_header, {"Key": Key})

    def get_object(self, *, Bucket: str, Key: str, Range: str | None = None) -> dict[str, Any]:
        request = _Request("GET", Key, {}, {"Range": Range} if Range else {})
        return self._call("GetObject", Bucket, request, _object, {"Key": Key}, raw=True)

    def head_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        request = _Request("HEAD", Key, {}, {})
        return self._call("HeadObject", Bucket, request, _head, {"Key": Key})

    def list_objects_v2(
        self,
        *,
        Bucket: str,
        Prefix: str = "",
        MaxKeys: int = 1000,
        ContinuationToken: str | None = None,
        StartAfter: str | None = None,
    ) -> dict[str, Any]:
        # As botocore asks: keys URL-encoded in the answer, which XML 1.0 could
        # not carry otherwise (a control character in a partition value).
        query = {"list-type": "2", "prefix": Prefix, "max-keys": str(MaxKeys)}
        query["encoding-type"] = "url"
        if ContinuationToken:
            query["continuation-token"] = ContinuationToken
        if StartAfter:
            query["start-after"] = StartAfter
        request = _Request("GET", None, query, {})
        return self._call("ListObjectsV2", Bucket, request, _objects, {"Prefix": Prefix})

    def delete_objects(self, *, Bucket: str, Delete: Mapping[str, Any]) -> dict[str, Any]:
        keys = "".join(f"<Object><Key>{escape(o['Key'])}</Key></Object>" for o in Delete["Objects"])
        quiet = "<Quiet>true</Quiet>" if Delete.get("Quiet") else ""
        body = f'<Delete xmlns="{_NS}">{quiet}{keys}</Delete>'.encode()
        # S3 requires a checksum of a DeleteObjects body.
        md5 = base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode()
        headers = {"Content-MD5": md5, "Content-Type": "application/xml"}
        request = _Request("POST", None, {"delete": ""}, headers, body)
        return self._call("DeleteObjects", Bucket, request, _deleted, {})

    # -- sending ----------------------------------------------------------------
    def _call(
        self,
        op: str,
        bucket: str,
        request: _Request,
        parse: Parse,
        params: Mapping[str, Any],
        *,
        raw: bool = False,
    ) -> dict[str, Any]:
        """One call: botocore's events around it, its attempts, the answer parsed
        (``raw``: the body kept as it came, as GetObject's)."""
        from zero_rename.core.s3.completers import retry_scale

        context: dict[str, Any] = {}
        events = self.meta.events
        kwargs = {"params": dict(params), "model": None, "context": context}
        events.emit(f"before-parameter-build.s3.{op}", **kwargs)
        events.emit(f"before-call.s3.{op}", **kwargs)
        path = "/" + quote(bucket, safe="")
        if request.key is not None:
            path += "/" + quote(request.key, safe="/~")
        if request.query:
            path += "?" + urlencode(request.query, quote_via=quote, safe="~")
        attempt = 1
        while True:
            events.emit(f"before-send.s3.{op}", request=request, context=context)
            status, headers, data, failure = self._attempt(request, path)
            scale = retry_scale(status, _code(data) if status >= 300 else "") if status else 0.05
            if status == 200 and op == "CompleteMultipartUpload" and not _whole(data):
                status, scale = 500, 0.05  # botocore's 200-with-an-error is a 500
            if (status and status < 300) or scale is None or attempt >= self.max_attempts:
                break
            backoff(attempt - 1, base=scale, cap=_MAX_BACKOFF)
            attempt += 1
        meta = {"HTTPStatusCode": status, "HTTPHeaders": headers, "RetryAttempts": attempt - 1}
        if failure is not None:
            raise failure
        if status >= 300:
            raise ClientError({"Error": _error(status, data), "ResponseMetadata": meta}, op)
        root = None if raw else parse_xml(data)
        parsed = parse(status, headers, root)
        if raw:
            parsed["Body"] = _Body(data)
        parsed["ResponseMetadata"] = meta
        events.emit(f"after-call.s3.{op}", parsed=parsed, model=None, context=context)
        return parsed

    def _attempt(
        self, request: _Request, path: str
    ) -> tuple[int, dict[str, str], bytes, Exception | None]:
        try:
            answer = self.requests.send(request.method, path, request.body, request.headers)
        except TlsRefused as exc:  # named as botocore names it: the cause, not "unreachable"
            return 0, {}, b"", SSLError(endpoint_url=self.origin, error=exc)
        except NotConnected as exc:
            return 0, {}, b"", EndpointConnectionError(endpoint_url=self.origin, error=exc)
        except TransportError as exc:  # no answer, or half of one
            return 0, {}, b"", HTTPClientError(error=exc)
        headers = {k.lower(): v for k, v in answer.headers.items()}
        return answer.status, headers, answer.data or b"", None


def _nothing(status: int, headers: Mapping[str, str], root: ET.Element | None) -> dict[str, Any]:
    return {}


def _fields(**names: str) -> Parse:
    """Parse the answer's top-level elements: result key -> element name."""

    def parse(status: int, headers: Mapping[str, str], root: ET.Element | None) -> dict[str, Any]:
        if root is None:
            raise ClientError({"Error": {"Code": "MalformedXML", "Message": "no answer"}}, "S3")
        return {name: child_text(root, element) for name, element in names.items()}

    return parse


def _etag_header(
    status: int, headers: Mapping[str, str], root: ET.Element | None
) -> dict[str, Any]:
    return {"ETag": headers.get("etag", "")}


def _object(status: int, headers: Mapping[str, str], root: ET.Element | None) -> dict[str, Any]:
    return {
        "ETag": headers.get("etag", ""),
        "ContentLength": int(headers.get("content-length") or 0),
        "LastModified": _http_date(headers.get("last-modified")),
    }


def _head(status: int, headers: Mapping[str, str], root: ET.Element | None) -> dict[str, Any]:
    return _object(status, headers, root)


def _children(root: ET.Element | None, name: str) -> list[ET.Element]:
    return [c for c in root if local_name(c.tag) == name] if root is not None else []


def _truth(root: ET.Element | None, name: str) -> bool:
    return root is not None and child_text(root, name).lower() == "true"


def _parts(status: int, headers: Mapping[str, str], root: ET.Element | None) -> dict[str, Any]:
    parts = [
        {
            "PartNumber": int(child_text(p, "PartNumber")),
            "ETag": child_text(p, "ETag"),
            "Size": int(child_text(p, "Size") or 0),
        }
        for p in _children(root, "Part")
    ]
    answer: dict[str, Any] = {"Parts": parts, "IsTruncated": _truth(root, "IsTruncated")}
    if root is not None and child_text(root, "NextPartNumberMarker"):
        answer["NextPartNumberMarker"] = int(child_text(root, "NextPartNumberMarker"))
    return answer


def _uploads(status: int, headers: Mapping[str, str], root: ET.Element | None) -> dict[str, Any]:
    uploads = [
        {
            "Key": child_text(u, "Key"),
            "UploadId": child_text(u, "UploadId"),
            "Initiated": _iso_date(child_text(u, "Initiated")),
        }
        for u in _children(root, "Upload")
    ]
    answer: dict[str, Any] = {"Uploads": uploads, "IsTruncated": _truth(root, "IsTruncated")}
    for name in ("NextKeyMarker", "NextUploadIdMarker"):
        if root is not None and child_text(root, name):
            answer[name] = child_text(root, name)
    return answer


def _objects(status: int, headers: Mapping[str, str], root: ET.Element | None) -> dict[str, Any]:
    # Decoded only where the store says it encoded (as botocore does): one that
    # ignores encoding-type sends keys as they are, '%' and '+' included.
    encoded = root is not None and child_text(root, "EncodingType") == "url"
    key = unquote_plus if encoded else str
    contents = [
        {
            "Key": key(child_text(o, "Key")),
            "Size": int(child_text(o, "Size") or 0),
            "ETag": child_text(o, "ETag"),
            "LastModified": _iso_date(child_text(o, "LastModified")),
        }
        for o in _children(root, "Contents")
    ]
    answer: dict[str, Any] = {"IsTruncated": _truth(root, "IsTruncated")}
    if contents:
        answer["Contents"] = contents
    if root is not None and child_text(root, "NextContinuationToken"):
        answer["NextContinuationToken"] = child_text(root, "NextContinuationToken")
    return answer


def _deleted(status: int, headers: Mapping[str, str], root: ET.Element | None) -> dict[str, Any]:
    errors = [
        {name: child_text(e, name) for name in ("Key", "Code", "Message")}
        for e in _children(root, "Error")
    ]
    return {"Errors": errors} if errors else {}


def _iso_date(text: str) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _http_date(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None


def _code(data: bytes) -> str:
    root = parse_xml(data)
    return child_text(root, "Code") if root is not None else ""


def _whole(data: bytes) -> bool:
    """Whether a 200's body is a whole answer, not an Error document or cut short."""
    root = parse_xml(data)
    return root is not None and local_name(root.tag) != "Error"


def _error(status: int, data: bytes) -> dict[str, str]:
    """The ``Error`` botocore would give: the body's code and message, else (a HEAD,
    or a body that is not XML) the status as the code, as botocore does."""
    root = parse_xml(data)
    code = child_text(root, "Code") if root is not None else ""
    message = child_text(root, "Message") if root is not None else ""
    if not code and status == 304:
        message = "Not Modified"
    return {"Code": code or str(status), "Message": message}
