"""Two ways of sending CompleteMultipartUpload, one object per process.

- :class:`BotocoreCompleter` calls ``complete_multipart_upload`` on a boto3
  client, as :class:`zero_rename.core.s3.client.S3Store` does.
- :class:`LightCompleter` builds the small request itself, signs it as
  botocore's ``S3SigV4Auth`` signs (:mod:`zero_rename.core.s3.sigv4`) and sends
  it over a connection pool of its own
  (:class:`zero_rename.core.s3.signing.SignedPool`). Measured by
  ``bench/fanout_probe.py`` (docs/benchmarks.md) it takes well under half the
  client CPU of a botocore call: botocore runs some twenty event handlers,
  endpoint rules, a user agent builder, a validator, a serializer and a parser
  per request, none of which a fixed request of a few hundred bytes needs.

The light path keeps what matters from botocore: the endpoint, region and
credentials are resolved by botocore once (so ``AWS_ENDPOINT_URL``, profiles,
instance roles and refreshing credentials work as for every other call), the
signature is botocore's (checked against it by the suite), and retries follow
botocore's "standard" mode: connection errors, 500/502/503/504, 429 and the
transient or throttling error codes are retried with truncated exponential
backoff and full jitter, up to ``StoreConfig.max_attempts`` attempts in all; a
200 whose body is an ``Error`` document or unparsable is a 500, as botocore's
``_handle_200_error`` makes it for this operation. What it does not do is
covered by falling back to the botocore path (see
:func:`light_path_unsupported`): proxies, a CA bundle set in the AWS
configuration rather than the environment, directory buckets. It sends no
checksums, SSE-C or expected-bucket-owner headers: the committer's uploads use
none (checksums are "when required").

Both return an :class:`Outcome` and never raise for an S3 answer: the failure
carries the S3 error code and the HTTP status, so the caller can tell a
``NoSuchUpload`` from a 5xx after its retries.

The light path runs no botocore event handlers, so whoever watches a client's
requests through them (request counters, tracing, fault injection in tests)
registers a :data:`RequestHook` for that client with :func:`add_request_hook`
as well: a light completer working for a store on that client (its ``owner``)
calls it before the call, before each attempt is sent and after the call.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, urlsplit
from xml.sax.saxutils import escape

from botocore.exceptions import BotoCoreError, ClientError

from zero_rename.core.s3.client import StoreConfig, make_client, translate
from zero_rename.core.s3.http import child_text, direct_unsupported, local_name, parse_xml
from zero_rename.core.s3.signing import SignedPool
from zero_rename.core.s3.stats import RequestStats
from zero_rename.core.s3.transport import TransportError
from zero_rename.errors import StoreError

log = logging.getLogger(__name__)

OPERATION = "CompleteMultipartUpload"

# botocore.retries.standard: what its standard mode retries.
_TRANSIENT_STATUS = frozenset({500, 502, 503, 504})
_THROTTLING_STATUS = frozenset({429})
_TRANSIENT_CODES = frozenset(
    {"RequestTimeout", "RequestTimeoutException", "PriorRequestNotComplete"}
)
_THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)
# Backoff base: 1 s for throttling, 50 ms otherwise, doubling, at most 20 s (botocore's).
_THROTTLING_SCALE = 1.0
_TRANSIENT_SCALE = 0.05
_MAX_BACKOFF = 20.0
_PROBE_KEY = "zero-rename-endpoint-probe"


RequestHook = Callable[[str, str, dict[str, Any]], None]
"""Called as ``hook(stage, key, context)``; ``stage`` is ``before`` (once, before
the first attempt), ``send`` (before each attempt) or ``after`` (once, after
the last answer, whatever it was); ``context`` is one dict per call. A
``ClientError`` raised at ``before`` or ``after`` fails the call with its code
and status, unretried, as a botocore ``before-call`` or ``after-call``
handler's would."""

_HOOKS_LOCK = threading.Lock()
# Weak: the hooks go with their client, and a new client never inherits a
# dead one's hooks through a reused id().
_HOOKS: weakref.WeakKeyDictionary[Any, tuple[RequestHook, ...]] = weakref.WeakKeyDictionary()


def add_request_hook(client: Any, hook: RequestHook) -> None:
    """Run ``hook`` around every light-path request made for a store on ``client``."""
    with _HOOKS_LOCK:
        _HOOKS[client] = _HOOKS.get(client, ()) + (hook,)


def remove_request_hook(client: Any, hook: RequestHook) -> None:
    with _HOOKS_LOCK:
        left = tuple(h for h in _HOOKS.get(client, ()) if h is not hook)
        if left:
            _HOOKS[client] = left
        else:
            _HOOKS.pop(client, None)


def _hooks(owner: Any) -> tuple[RequestHook, ...]:
    if owner is None:
        return ()
    with _HOOKS_LOCK:
        return _HOOKS.get(owner, ())


@dataclass(frozen=True)
class CompleteFailure:
    """Why an upload was not completed: the S3 error code and HTTP status of the
    last attempt (``status`` 0 and ``code`` "": no answer at all)."""

    code: str
    status: int
    message: str

    @property
    def outcome_unknown(self) -> bool:
        """Whether the complete may have taken effect although it failed (see
        :attr:`zero_rename.errors.StoreError.outcome_unknown`)."""
        return StoreError("", status=self.status).outcome_unknown

    def error(self, where: str) -> Exception:
        """The error :class:`~zero_rename.core.s3.client.S3Store` would have raised
        (``NoSuchUpload``, ``PreconditionFailed``, ``StoreError``...)."""
        if self.status == 0 and not self.code:
            return StoreError(f"{OPERATION} {where}: {self.message}", operation=OPERATION)
        response: dict[str, Any] = {
            "Error": {"Code": self.code or str(self.status), "Message": self.message},
            "ResponseMetadata": {"HTTPStatusCode": self.status},
        }
        return translate(ClientError(response, OPERATION), OPERATION, where)


@dataclass(frozen=True)
class Outcome:
    """What became of one complete: its ETag, or a failure."""

    etag: str | None
    failure: CompleteFailure | None


Parts = Sequence[tuple[int, str]]


class Completer(Protocol):
    """Completes uploads of one bucket; thread-safe; counts into ``stats``."""

    stats: RequestStats

    def complete(self, key: str, upload_id: str, parts: Parts) -> Outcome: ...

    def close(self) -> None: ...


class BotocoreCompleter:
    """CompleteMultipartUpload through a boto3 client, retried by botocore."""

    def __init__(self, config: StoreConfig, bucket: str, stats: RequestStats) -> None:
        self.client = make_client(config)
        self.bucket = bucket
        self.stats = stats

    def complete(self, key: str, upload_id: str, parts: Parts) -> Outcome:
        start = time.perf_counter_ns()
        try:
            response = self.client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in parts]},
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            meta = exc.response.get("ResponseMetadata", {})
            # Retries before a failure are requests too.
            self.stats.record(
                OPERATION,
                time.perf_counter_ns() - start,
                retries=int(meta.get("RetryAttempts", 0)),
                failed=True,
            )
            return Outcome(
                None,
                CompleteFailure(
                    str(error.get("Code", "")),
                    int(meta.get("HTTPStatusCode") or 0),
                    str(error.get("Message", "") or exc),
                ),
            )
        except BotoCoreError as exc:  # no answer: connection refused, reset, timeout
            self.stats.record(OPERATION, time.perf_counter_ns() - start, failed=True)
            return Outcome(None, CompleteFailure("", 0, str(exc)))
        retries = int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0))
        self.stats.record(OPERATION, time.perf_counter_ns() - start, retries=retries)
        return Outcome(str(response.get("ETag", "")), None)

    def close(self) -> None:
        self.client.close()


def light_path_unsupported(config: StoreConfig, bucket: str) -> str | None:
    """Why the light path cannot send like botocore would here, or None if it can."""
    if bucket.endswith("--x-s3"):
        return "directory buckets (S3 Express One Zone) sign with session credentials"
    if config.endpoint_url is not None and not config.endpoint_url.startswith(
        ("http://", "https://")
    ):
        return f"endpoint {config.endpoint_url!r} is not http(s)"
    # Without an endpoint, botocore sends to AWS over https.
    return direct_unsupported(config.endpoint_url or "https://s3.amazonaws.com")


@dataclass(frozen=True)
class LightTarget:
    """Where botocore would send a bucket's requests, and the region it signs for.

    Resolved once, by botocore, in the parent (:meth:`resolve`): so
    ``AWS_ENDPOINT_URL``, path or virtual-hosted addressing, FIPS and
    dual-stack settings mean here what they mean to every other call, and a
    worker need not load botocore's S3 model to find out.
    """

    origin: str  # scheme://host[:port]
    base_path: str  # "" (virtual-hosted) or "/bucket" (path style)
    region: str

    @classmethod
    def resolve(cls, config: StoreConfig, bucket: str, client: Any = None) -> LightTarget:
        """``client``: the botocore client of ``config`` already at hand, asked
        rather than a new one made (10 to 15 ms of CPU a job commit)."""
        own = client is None
        client = make_client(config) if own else client
        try:
            parts = urlsplit(bucket_base_url(client, bucket))
            return cls(
                f"{parts.scheme}://{parts.netloc}",
                parts.path.rstrip("/"),
                str(client.meta.region_name),
            )
        finally:
            if own:
                client.close()


class LightCompleter:
    """CompleteMultipartUpload signed as botocore signs it, sent over a pool of its own,
    parsed here."""

    def __init__(
        self, config: StoreConfig, target: LightTarget, stats: RequestStats, owner: Any = None
    ) -> None:
        """``owner``: the client of the store this completes for, whose request
        hooks run (see :func:`add_request_hook`); None in a worker process."""
        self.owner = owner
        self.requests = SignedPool(config, target.origin, target.region)
        self.stats = stats
        self.max_attempts = config.max_attempts
        self.base_path = target.base_path

    def complete(self, key: str, upload_id: str, parts: Parts) -> Outcome:
        hooks = _hooks(self.owner)
        context: dict[str, Any] = {}
        start = time.perf_counter_ns()
        refused = _run_hooks(hooks, "before", key, context)
        if refused is not None:
            self.stats.record(OPERATION, time.perf_counter_ns() - start, failed=True)
            return refused
        path = f"{self.base_path}/{quote(key, safe='/~')}?uploadId={quote(upload_id, safe='~')}"
        body = request_body(parts)
        attempt = 1
        while True:
            _run_hooks(hooks, "send", key, context)
            outcome, retry_scale = self._attempt(path, body)
            if retry_scale is None or attempt >= self.max_attempts:
                break
            time.sleep(random.random() * min(retry_scale * 2 ** (attempt - 1), _MAX_BACKOFF))
            attempt += 1
        outcome = _run_hooks(hooks, "after", key, context) or outcome
        self.stats.record(
            OPERATION,
            time.perf_counter_ns() - start,
            retries=attempt - 1,
            failed=outcome.failure is not None,
        )
        return outcome

    def _attempt(self, path: str, body: bytes) -> tuple[Outcome, float | None]:
        """One attempt: its outcome, and the backoff scale if it is worth retrying."""
        try:
            response = self.requests.send("POST", path, body)
        except BotoCoreError as exc:  # credentials that could not be refreshed
            return Outcome(None, CompleteFailure("", 0, str(translate(exc, OPERATION, path)))), None
        except TransportError as exc:  # no answer, or half of one
            return Outcome(
                None, CompleteFailure("", 0, f"{type(exc).__name__}: {exc}")
            ), _TRANSIENT_SCALE
        return _judge(response.status, response.data)

    def close(self) -> None:
        self.requests.close()


def _run_hooks(
    hooks: Sequence[RequestHook], stage: str, key: str, context: dict[str, Any]
) -> Outcome | None:
    """Run the hooks; the failure a hook raised as a ClientError, else None."""
    for hook in hooks:
        try:
            hook(stage, key, context)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            return Outcome(
                None,
                CompleteFailure(
                    str(error.get("Code", "")), status, str(error.get("Message", "") or exc)
                ),
            )
    return None


def bucket_base_url(client: Any, bucket: str) -> str:
    """The URL botocore would address ``bucket`` at (path or virtual-hosted style,
    custom endpoint, ``AWS_ENDPOINT_URL``, FIPS, dual-stack...), resolved once by
    presigning a request for a probe key: presigning sends nothing."""
    url: str = client.generate_presigned_url(
        "complete_multipart_upload",
        ExpiresIn=60,
        Params={"Bucket": bucket, "Key": _PROBE_KEY, "UploadId": "probe"},
    )
    base, found, _ = url.partition(f"/{_PROBE_KEY}?")
    if not found:
        raise StoreError(
            f"cannot find where botocore addresses bucket {bucket!r} "
            f"(presigned URL {urlsplit(url)._replace(query='').geturl()})",
            operation=OPERATION,
        )
    return base


def request_body(parts: Parts) -> bytes:
    xml = "".join(
        f"<Part><PartNumber>{int(n)}</PartNumber><ETag>{escape(e)}</ETag></Part>" for n, e in parts
    )
    return (
        f'<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"{xml}</CompleteMultipartUpload>"
    ).encode()


def _judge(status: int, data: bytes) -> tuple[Outcome, float | None]:
    """The outcome of an answer, and the backoff scale if it should be retried."""
    root = parse_xml(data)
    if status == 200 and root is not None and local_name(root.tag) != "Error":
        return Outcome(child_text(root, "ETag"), None), None
    if status == 200:
        # S3 may answer 200 and then fail while it assembles the object: an
        # Error document, or a body cut short. botocore makes both a 500.
        status = 500
    code = child_text(root, "Code") if root is not None else ""
    message = child_text(root, "Message") if root is not None else ""
    failure = CompleteFailure(
        code or str(status), status, message or data[:200].decode("utf-8", "replace")
    )
    return Outcome(None, failure), retry_scale(status, code)


def retry_scale(status: int, code: str) -> float | None:
    """The backoff scale of an S3 error answer botocore's standard mode retries,
    else None."""
    if code in _THROTTLING_CODES or status in _THROTTLING_STATUS:
        return _THROTTLING_SCALE
    if code in _TRANSIENT_CODES or status in _TRANSIENT_STATUS:
        return _TRANSIENT_SCALE
    return None


REQUEST_PATHS = ("light", "botocore")


def make_completer(
    config: StoreConfig,
    bucket: str,
    path: str,
    stats: RequestStats,
    target: LightTarget | None = None,
    owner: Any = None,
) -> Completer:
    """The completer for ``path`` ("light" or "botocore"); the light one at
    ``target``, resolved here if not given, running ``owner``'s request hooks."""
    if path == "light":
        return LightCompleter(config, target or LightTarget.resolve(config, bucket), stats, owner)
    if path == "botocore":
        return BotocoreCompleter(config, bucket, stats)
    raise ValueError(f"request path {path!r}: choose from {', '.join(REQUEST_PATHS)}")
