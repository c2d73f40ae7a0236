"""The S3 store layer: the few S3 calls the protocol makes, over boto3.

Credentials come from boto3's standard chain (environment, profile, instance
role); only an endpoint is ever configured here, so no secret passes through
this module's logs or errors. Every call is counted in a :class:`RequestStats`.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    CredentialRetrievalError,
    EndpointConnectionError,
    NoAuthTokenError,
    NoCredentialsError,
    PartialCredentialsError,
    SSOError,
    TokenRetrievalError,
    UnknownCredentialError,
)

from zero_rename.core.s3.backoff import backoff
from zero_rename.core.s3.listing import streamed_uploads, streaming_unsupported
from zero_rename.core.s3.profiles import AUTO, StoreProfile, check_profile_name, named_profile
from zero_rename.core.s3.redact import has_userinfo, redact, shown_url
from zero_rename.core.s3.stats import BODY_READ, RequestStats
from zero_rename.errors import (
    ConditionalConflict,
    ConfigError,
    CredentialsError,
    DestinationError,
    NoSuchUpload,
    PreconditionFailed,
    StoreError,
    ZeroRenameError,
)

if TYPE_CHECKING:
    from botocore.config import Config

log = logging.getLogger(__name__)

# S3: DeleteObjects takes at most 1,000 keys a request.
DELETE_BATCH = 1000
# S3: ListMultipartUploads returns at most 1,000 uploads a page.
UPLOADS_PAGE = 1000
# S3's answers to credentials it does not take: the key id unknown, the secret
# wrong, the session token invalid or expired.
_REJECTED_CREDENTIAL_CODES = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "TokenRefreshRequired",
    "InvalidClientTokenId",
}
# Credentials taken, the request refused (a policy); a HEAD's refusal has no body
# to tell which, hence "403" (see S3Store.check_bucket).
_REFUSED_CODES = {"AccessDenied", "403"}
# botocore's errors for credentials it found none of, or could not complete or fetch.
_NO_CREDENTIALS = (
    NoCredentialsError,
    PartialCredentialsError,
    CredentialRetrievalError,
    NoAuthTokenError,
    TokenRetrievalError,
    SSOError,
    UnknownCredentialError,
)
# Where credentials come from, for every error about them (never botocore's text).
CREDENTIALS_HELP = (
    "Credentials come from boto3's standard chain: AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN for temporary ones) in the "
    "environment, a profile in ~/.aws/credentials or ~/.aws/config (AWS_PROFILE), or "
    "the instance's or container's role; an Airflow connection gives its own"
)
_MISSING_KEY_CODES = {"NoSuchKey", "404", "NotFound"}
# GETs of one object whose body is cut short before it is given up on.
BODY_ATTEMPTS = 3
# A Server header kept at most this long: it is the store's, whatever it holds.
SERVER_CHARS = 200
# Where boto3 finds an S3 endpoint in the environment; the first set wins.
_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
# botocore's own check of a region name (botocore.utils.validate_region_name).
_REGION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?")


@dataclass(frozen=True)
class StoreConfig:
    """How to reach S3. ``endpoint_url`` selects MinIO, Ceph, SeaweedFS...; None means AWS.

    ``max_attempts`` counts every attempt of a request, the first included (1:
    no retries). ``profile`` is ``auto`` (probe the store at job setup) or a
    store family from :data:`zero_rename.core.s3.profiles.PROFILES`.

    How requests are sent: ``request_path`` ``auto`` (the light client,
    :mod:`zero_rename.core.s3.light`, for every call, and the light path for job
    commit's CompleteMultipartUpload requests, :mod:`zero_rename.core.s3.fanout`,
    unless something in the configuration needs botocore), ``light`` or
    ``botocore`` (botocore's client for every call); ``complete_processes`` 0 to
    choose by the host (worker processes only where cores are free and the store
    is not on this machine), 1 for none, more for that many.

    ``profile_max_age``: seconds a probed profile is kept beside a destination
    (:mod:`zero_rename.core.s3.profile_record`) for later jobs in any process;
    0 keeps none (probed once a process).

    Raises:
        ConfigError: at construction, for a value no client could use.
    """

    endpoint_url: str | None = None
    region: str | None = None
    max_pool_connections: int = 64
    max_attempts: int = 6
    connect_timeout: float = 10.0
    # CompleteMultipartUpload "could take several minutes" (S3 API reference).
    read_timeout: float = 300.0
    path_style: bool | None = None
    profile: str = AUTO
    request_path: str = AUTO
    complete_processes: int = 0
    # Seconds a probed store profile is kept beside a destination (0: not kept).
    profile_max_age: float = 86400.0

    def __post_init__(self) -> None:
        for name in ("max_pool_connections", "max_attempts", "complete_processes"):
            value = getattr(self, name)
            least = 0 if name == "complete_processes" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigError(
                    f"StoreConfig.{name} must be an integer >= {least}, got {value!r}"
                )
        if self.request_path not in (AUTO, "light", "botocore"):
            raise ConfigError(
                f"StoreConfig.request_path must be auto, light or botocore, "
                f"got {self.request_path!r}"
            )
        age = self.profile_max_age
        if isinstance(age, bool) or not isinstance(age, (int, float)) or not 0 <= age < 1e9:
            raise ConfigError(
                f"StoreConfig.profile_max_age must be a number of seconds >= 0, got {age!r}"
            )
        for name in ("connect_timeout", "read_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(
                    f"StoreConfig.{name} must be a positive number of seconds, got {value!r}"
                )
        object.__setattr__(self, "profile", check_profile_name(self.profile))
        if self.endpoint_url is not None:
            check_endpoint(self.endpoint_url)
        if self.region is not None:
            check_region(self.region)


@dataclass(frozen=True)
class PartInfo:
    number: int
    etag: str
    size: int


@dataclass(frozen=True)
class UploadInfo:
    key: str
    upload_id: str
    initiated: datetime | None


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str
    last_modified: datetime | None = None


def environment_endpoint() -> str | None:
    """The endpoint boto3 takes from the environment when none is configured."""
    return next((os.environ[n] for n in _ENDPOINT_VARIABLES if os.environ.get(n)), None)


def check_endpoint(url: object, source: str = "endpoint") -> str:
    """An http(s) URL with a host and no credentials in it (they would reach logs
    and error messages). ``source`` names where it came from, for the message,
    which shows the URL only through :func:`shown_url`.

    Raises:
        ConfigError: for anything else.
    """
    text = str(url)
    if has_userinfo(text):
        # Before anything else: '@' anywhere may end a credential (secrets hold '/').
        raise ConfigError(
            f"{source} may not carry credentials (got {shown_url(text)!r}); zero-rename "
            "takes them only from the standard AWS credential chain (environment, profile, role)"
        )
    try:
        parts = urlsplit(text)
        _ = parts.port  # raises on a malformed port
        text.encode("utf-8")  # raises on a lone surrogate (a UnicodeEncodeError)
        http = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        http = False
    if not isinstance(url, str) or not http:
        raise ConfigError(
            f"{source} must be an http(s) URL such as http://127.0.0.1:8333 or "
            f"https://s3.example.com (got {shown_url(text)!r})"
        )
    return text


def check_region(region: object, source: str = "region") -> str:
    """Raises ConfigError unless ``region`` is a name botocore takes (it would
    raise its own error, naming no option, at the first client)."""
    if not isinstance(region, str) or not _REGION.fullmatch(region):
        raise ConfigError(
            f"{source} {str(region)[:80]!r} is not a region name such as us-east-1 "
            "(letters, digits and '-')"
        )
    return region


def check_environment_endpoint() -> str | None:
    """The endpoint boto3 would take from the environment, checked as one given
    in code is: boto3 itself would quote a credential in it in its errors."""
    for name in _ENDPOINT_VARIABLES:
        if os.environ.get(name):
            check_endpoint(os.environ[name], f"${name}")
    return environment_endpoint()


def client_config(config: StoreConfig, s3: Mapping[str, Any] | None = None) -> Config:
    """The botocore settings of a client for commit work: its pool, retries and
    timeouts from ``config``. ``s3``: the client's S3 settings (the addressing
    style ``config`` implies by default; none for an empty mapping).

    The one place these are chosen: the core's own clients and the Airflow
    hook's (:mod:`zero_rename.airflow.hooks`) both take them from here.
    """
    if s3 is None:
        path_style = (
            config.path_style if config.path_style is not None else bool(config.endpoint_url)
        )
        s3 = {"addressing_style": "path" if path_style else "auto"}
    from botocore.config import Config

    return Config(
        max_pool_connections=config.max_pool_connections,
        # Standard mode retries 5xx, throttling (SlowDown) and timeouts with
        # exponential backoff and jitter; it never retries 409 or 412, which
        # the protocol reads as answers.
        retries={"mode": "standard", "total_max_attempts": config.max_attempts},
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        # Conditional writes (If-Match, If-None-Match) need SigV4.
        signature_version="s3v4",
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        **({"s3": dict(s3)} if s3 else {}),
    )


def make_client(config: StoreConfig, session: Any = None) -> Any:
    """An S3 client sized and retried for commit work: botocore's, which boto3's
    is, without what boto3 adds (its file transfer methods), whose import and
    set-up would cost every fresh Python worker tens of milliseconds.

    ``session`` is a botocore session to build it from (a new one by default),
    for a caller that needs the session's credentials or settings as well.
    """
    session = session or botocore_session()
    if config.endpoint_url is None:
        check_environment_endpoint()
    region = config.region or session.get_config_variable("region") or "us-east-1"
    try:
        return session.create_client(
            "s3",
            endpoint_url=config.endpoint_url,
            region_name=check_region(region, "region" if config.region else "configured region"),
            config=client_config(config),
        )
    except _NO_CREDENTIALS as exc:  # resolved with the client: a key id without its secret
        raise no_credentials(exc, "") from None


def declared_profile(name: str | None) -> StoreProfile | None:
    """The profile a store family's name declares; None for ``auto`` (or none):
    then a job's record or a probe says. Every path that builds a store applies
    it (the command line's ``--store-profile``, ``StoreConfig.profile``, an
    Airflow connection's or a Dagster resource's ``store_profile``), so that even
    a step with no record to go by (an abort of a job whose record is unreadable,
    a listing of pending uploads) behaves as the store needs."""
    if not name or check_profile_name(name) == AUTO:
        return None
    return named_profile(name)


_LOADER_LOCK = threading.Lock()
_LOADER: Any = None


def botocore_session() -> Any:
    """A new botocore session (credentials are resolved afresh) sharing one
    loader, so the service models are parsed once a process, not per client."""
    global _LOADER
    # Imported here: botocore's session brings its client machinery, which a
    # process on the light path (zero_rename.core.s3.light) never needs.
    import botocore.session

    session = botocore.session.Session()
    with _LOADER_LOCK:
        if _LOADER is None:
            _LOADER = session.get_component("data_loader")
        else:
            session.register_component("data_loader", _LOADER)
    return session


def credentials_and_region(config: StoreConfig) -> tuple[Any, str]:
    """Frozen credentials (None where there are none) and the region for
    ``config``, as botocore resolves them. A whole static set in the environment,
    the first source of botocore's chain, with no AWS config file that could name
    a region, spares the process botocore's session: about 0.2 s of CPU in a
    fresh one, such as each worker of a Spark read."""
    # Imported here: both modules import this one.
    from zero_rename.core.s3.http import aws_config_file
    from zero_rename.core.s3.sigv4 import environment_credentials

    credentials = environment_credentials()
    if credentials is not None and aws_config_file() is None:
        return credentials, config.region or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    session = botocore_session()
    found = session.get_credentials()
    frozen = found.get_frozen_credentials() if found is not None else None
    return frozen, config.region or session.get_config_variable("region") or "us-east-1"


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int:
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or exc.response.get(
        "Error", {}
    ).get("Code", "")
    return int(status) if str(status).isdigit() else 0


def translate(exc: Exception, op: str, where: str) -> Exception:
    """Turn a botocore error into one of ours; the message names the call and the key."""
    if isinstance(exc, ClientError):
        return _answered(exc, op, where)
    if isinstance(exc, _NO_CREDENTIALS):
        return no_credentials(exc, f"{op} {where}")
    # botocore quotes the endpoint as configured (~/.aws/config is not checked here).
    if isinstance(exc, EndpointConnectionError):
        return StoreError(
            redact(f"{op} {where}: cannot reach the S3 endpoint ({exc})"), operation=op
        )
    if isinstance(exc, BotoCoreError):
        return StoreError(redact(f"{op} {where}: {exc}"), operation=op)
    return exc


def _answered(exc: ClientError, op: str, where: str) -> ZeroRenameError:
    """The error for an S3 answer that refused the request, by its code and status."""
    code, status = _code(exc), _status(exc)
    message = exc.response.get("Error", {}).get("Message", "") or str(exc)
    text = redact(f"{op} {where}: {code or status} {message}".strip())
    if code == "PreconditionFailed" or status == 412:
        return PreconditionFailed(text, operation=op, code="PreconditionFailed", status=412)
    if code == "ConditionalRequestConflict" or status == 409:
        return ConditionalConflict(text, operation=op, code=code or "409", status=409)
    if code == "NoSuchUpload":
        return NoSuchUpload(text, operation=op, code=code, status=status or 404)
    if code == "NoSuchBucket":
        return DestinationError(f"bucket does not exist ({text}); create it or fix the destination")
    if code in _REJECTED_CREDENTIAL_CODES:
        return CredentialsError(
            f"the S3 store refused the credentials ({code} on {op} {where}): an unknown "
            f"key id, a wrong secret or an expired session token. {CREDENTIALS_HELP}"
        )
    if code in _REFUSED_CODES:
        return DestinationError(f"access refused ({text}); check the credentials and bucket policy")
    return StoreError(text, operation=op, code=code, status=status)


def no_credentials(exc: BaseException, what: str) -> CredentialsError:
    """The error for credentials botocore found none of (or an incomplete set, or
    could not fetch from their provider) for ``what``: ours, never botocore's text,
    which may quote a profile's or a process's output."""
    found = (
        "only part of a set"
        if isinstance(exc, PartialCredentialsError)
        else "none from their provider"
        if isinstance(exc, (CredentialRetrievalError, TokenRetrievalError, SSOError))
        else "none"
    )
    return CredentialsError(
        f"no usable S3 credentials{f' for {what}' if what else ''} (found {found}). "
        + CREDENTIALS_HELP
    )


class S3Store:
    """The protocol's S3 operations on one client, counted into ``stats``.

    ``profile`` is the store's known behaviour (None until a job's record or a
    probe says): it selects the fallback for listing pending uploads.
    """

    def __init__(
        self,
        client: Any,
        stats: RequestStats | None = None,
        profile: StoreProfile | None = None,
        config: StoreConfig | None = None,
    ) -> None:
        """``config``: the configuration ``client`` was made from with boto3's
        standard credential chain, which lets job commit open connections of
        its own (:mod:`zero_rename.core.s3.fanout`); None for a client made
        elsewhere (an Airflow connection's), whose requests all go through it."""
        self.client = client
        self.stats = stats if stats is not None else RequestStats()
        self.profile = profile
        self.config = config
        # The store's Server header as its last answer gave it ("" until one
        # came): part of the store's identity in the profile record.
        self.server = ""

    @classmethod
    def connect(cls, config: StoreConfig | None = None, *, light: bool = True) -> S3Store:
        """A store over a new client for ``config``, behaving as its ``profile``
        names (a declared family; ``auto``: as a job's record or a probe says).

        The client is a :class:`~zero_rename.core.s3.light.LightClient` wherever it
        sends as botocore would (``config.request_path`` not ``botocore``, and
        :func:`~zero_rename.core.s3.light.light_client_unsupported`): a third of
        botocore's client CPU a request and a twentieth to build, which every
        step pays, a fresh Spark worker's most. ``light=False``: botocore's
        client whatever the configuration."""
        config = config or StoreConfig()
        profile = declared_profile(config.profile)
        if light:
            from zero_rename.core.s3.light import LightClient, light_client_unsupported

            why = light_client_unsupported(config)
            if why is None:
                try:
                    return cls(LightClient(config), profile=profile, config=config)
                except _NO_CREDENTIALS as exc:
                    raise no_credentials(exc, "") from None
            log.info("requests through botocore's client: %s", why)
        return cls(make_client(config), profile=profile, config=config)

    def scoped(self, stats: RequestStats | None = None) -> S3Store:
        """The same connection pool, counting into other statistics (a task's, a job's)."""
        return S3Store(
            self.client, stats if stats is not None else RequestStats(), self.profile, self.config
        )

    def with_profile(self, profile: StoreProfile | None) -> S3Store:
        """The same connection pool and statistics, behaving as ``profile`` says."""
        if profile is None or profile == self.profile:
            return self
        return S3Store(self.client, self.stats, profile, self.config)

    @property
    def endpoint_url(self) -> str:
        return str(self.client.meta.endpoint_url)

    @property
    def region(self) -> str:
        return str(self.client.meta.region_name or "")

    @property
    def pool_size(self) -> int:
        return int(self.client.meta.config.max_pool_connections)

    def _call(self, op: str, where: str, nbytes: int = 0, **kwargs: Any) -> Any:
        method = getattr(self.client, _METHODS[op])
        start = time.perf_counter_ns()
        try:
            response = method(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            self.stats.record(op, time.perf_counter_ns() - start, nbytes, failed=True)
            if isinstance(exc, ClientError):
                self._note_server(exc.response)
            raise translate(exc, op, where) from exc
        self._note_server(response)
        retries = int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0))
        self.stats.record(op, time.perf_counter_ns() - start, nbytes, retries)
        return response

    def _note_server(self, response: Mapping[str, Any]) -> None:
        headers = response.get("ResponseMetadata", {}).get("HTTPHeaders") or {}
        server = headers.get("server")
        if isinstance(server, str):
            self.server = server[:SERVER_CHARS]

    # -- buckets -----------------------------------------------------------
    def check_bucket(self, bucket: str) -> None:
        """Raises DestinationError when the bucket is missing or not ours to write,
        CredentialsError when the store refuses the credentials."""
        try:
            self._call("HeadBucket", f"s3://{bucket}", Bucket=bucket)
        except StoreError as exc:
            if exc.code in ("404", "NoSuchBucket"):
                raise DestinationError(
                    f"bucket {bucket!r} does not exist; create it first"
                ) from exc
            raise
        except DestinationError as exc:
            if isinstance(exc, CredentialsError):  # none found: nothing was asked
                raise
            # A HEAD's 403 has no body to say whether the credentials or a policy were
            # refused: a listing of one key says (its error code), on the error path only.
            self._call("ListObjectsV2", f"s3://{bucket}", Bucket=bucket, MaxKeys=1)
            raise

    def get_lifecycle(self, bucket: str) -> dict[str, Any] | None:
        """The bucket's lifecycle configuration (its ``Rules`` and settings); None
        where the bucket has none (NoSuchLifecycleConfiguration)."""
        try:
            response = self._call(
                "GetBucketLifecycleConfiguration", f"s3://{bucket}", Bucket=bucket
            )
        except StoreError as exc:
            if exc.code == "NoSuchLifecycleConfiguration":
                return None
            raise
        return dict(response)

    def put_lifecycle(
        self, bucket: str, rules: Sequence[Mapping[str, Any]], settings: Mapping[str, Any]
    ) -> None:
        """Replace the bucket's lifecycle configuration: S3 has no conditional write
        for it, so a change made meanwhile by someone else is lost."""
        self._call(
            "PutBucketLifecycleConfiguration",
            f"s3://{bucket}",
            Bucket=bucket,
            LifecycleConfiguration={"Rules": list(rules)},
            **settings,
        )

    # -- multipart uploads -------------------------------------------------
    def create_upload(self, bucket: str, key: str) -> str:
        return str(
            self._call("CreateMultipartUpload", _url(bucket, key), Bucket=bucket, Key=key)[
                "UploadId"
            ]
        )

    def upload_part(self, bucket: str, key: str, upload_id: str, number: int, body: bytes) -> str:
        response = self._call(
            "UploadPart",
            _url(bucket, key),
            len(body),
            Bucket=bucket,
            Key=key,
            UploadId=upload_id,
            PartNumber=number,
            Body=body,
        )
        return str(response["ETag"])

    def complete_upload(
        self,
        bucket: str,
        key: str,
        upload_id: str,
        parts: Sequence[tuple[int, str]],
        *,
        if_none_match: bool = False,
    ) -> str:
        kwargs: dict[str, Any] = {"IfNoneMatch": "*"} if if_none_match else {}
        response = self._call(
            "CompleteMultipartUpload",
            _url(bucket, key),
            Bucket=bucket,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in parts]},
            **kwargs,
        )
        return str(response.get("ETag", ""))

    def abort_upload(self, bucket: str, key: str, upload_id: str) -> bool:
        """Abort a pending upload; False if it was no longer pending."""
        try:
            self._call(
                "AbortMultipartUpload",
                _url(bucket, key),
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
            )
            return True
        except NoSuchUpload:
            return False

    def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        parts: list[PartInfo] = []
        marker = 0
        while True:  # S3: at most 1,000 parts a page.
            response = self._call(
                "ListParts",
                _url(bucket, key),
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
                PartNumberMarker=marker,
            )
            parts += [
                PartInfo(int(p["PartNumber"]), str(p["ETag"]), int(p["Size"]))
                for p in response.get("Parts", [])
            ]
            if not response.get("IsTruncated"):
                return parts
            marker = int(response["NextPartNumberMarker"])

    def list_uploads(
        self, bucket: str, prefix: str, page_size: int | None = None, *, unique: bool = True
    ) -> Iterator[UploadInfo]:
        """Pending uploads whose keys start with ``prefix``, which must end in '/'.

        Listings differ by server: AWS pages by 1,000 with markers; SeaweedFS
        pages by ``NextUploadIdMarker`` alone, 10,000 a page unless
        ``MaxUploads`` says otherwise, scanning all the bucket's uploads for
        each page; moto ignores paging; none need sort. So pages of
        ``page_size`` (:data:`UPLOADS_PAGE`, 1,000, by default) are asked
        for (a million uploads parsed by botocore in one answer would take
        gigabytes); a store paging by upload id alone is asked for the rest in
        answers of up to a million, parsed as a stream
        (:mod:`zero_rename.core.s3.listing`); a truncated page without markers, or
        markers that do not advance, is an error rather than a restart from the
        start, and an upload seen twice is yielded once; with ``unique`` false,
        as often as the store lists it, for a caller that does not mind repeats
        and cannot afford remembering every upload (a job commit's listing of a
        million uploads: some 200 bytes each).
        Where the store takes a prefix as one exact key (MinIO), the bucket's
        uploads are listed without one and filtered here. Where the store's
        profile is not known, an empty prefix listing is confirmed that way, so
        the answer is right on every store without writing a probe.
        """
        if not prefix.endswith("/"):
            raise ValueError(f"upload listing prefix {prefix!r} must end in '/'")
        page_size = page_size or UPLOADS_PAGE
        if self.profile is not None and not self.profile.uploads_by_prefix:
            yield from self._uploads(bucket, prefix, page_size, False, unique)
            return
        found = False
        for upload in self._uploads(bucket, prefix, page_size, True, unique):
            found = True
            yield upload
        if not found and self.profile is None:
            yield from self._uploads(bucket, prefix, page_size, False, unique)

    def _uploads(
        self, bucket: str, prefix: str, page_size: int, by_prefix: bool, unique: bool = True
    ) -> Iterator[UploadInfo]:
        kwargs: dict[str, Any] = {"Bucket": bucket, "MaxUploads": page_size}
        if by_prefix:
            kwargs["Prefix"] = prefix
        seen: set[tuple[str, str]] = set()

        def kept(listed: Iterable[tuple[str, str, datetime | None]]) -> Iterator[UploadInfo]:
            for key, upload_id, initiated in listed:
                if (key, upload_id) in seen or not key.startswith(prefix):
                    continue
                if unique:
                    seen.add((key, upload_id))
                yield UploadInfo(key, upload_id, initiated)

        for page in self._pages(
            "ListMultipartUploads",
            _url(bucket, prefix),
            kwargs,
            ("NextKeyMarker", "KeyMarker"),
            ("NextUploadIdMarker", "UploadIdMarker"),
        ):
            yield from kept(
                (str(u["Key"]), str(u["UploadId"]), u.get("Initiated"))
                for u in page.get("Uploads", [])
            )
            if self._stream_instead(page, bucket):
                # The rest in large answers, from the start: the first page's
                # uploads come again, which ``kept`` or the caller absorbs.
                yield from kept(
                    streamed_uploads(self.client, self.stats, bucket, prefix if by_prefix else None)
                )
                return

    def _stream_instead(self, page: dict[str, Any], bucket: str) -> bool:
        """Whether to list the rest in large streamed answers (:mod:`zero_rename.core.s3.listing`):
        where the store pages by upload id alone (SeaweedFS), each page costs a scan
        of all the bucket's pending uploads."""
        if (
            not page.get("IsTruncated")
            or page.get("NextKeyMarker")
            or not page.get("NextUploadIdMarker")
        ):
            return False
        unsupported = streaming_unsupported(self.client)
        if unsupported is not None:
            log.info(
                "listing pending uploads of %s page by page, a scan each: %s", bucket, unsupported
            )
            return False
        return True

    def _pages(
        self, op: str, where: str, kwargs: dict[str, Any], *markers: tuple[str, str]
    ) -> Iterator[dict[str, Any]]:
        """The pages of a listing; ``markers`` pair each response field with the
        request parameter that continues from it. A truncated page must give at
        least one marker (SeaweedFS pages uploads by ``NextUploadIdMarker``
        alone), and the markers must advance: otherwise the listing fails
        rather than restart from the start or loop."""
        previous: tuple[str, ...] | None = None
        while True:
            response = self._call(op, where, **kwargs)
            yield response
            if not response.get("IsTruncated"):
                return
            position = tuple(str(response.get(field) or "") for field, _ in markers)
            if not any(position):
                raise StoreError(
                    f"{op} {where}: the store says the listing is truncated but "
                    f"gives no {' or '.join(f for f, _ in markers)} to continue "
                    "from; refusing to restart it or to act on part of it",
                    operation=op,
                )
            if position == previous:
                raise StoreError(
                    f"{op} {where}: the listing does not advance past "
                    f"{position!r}; refusing to loop",
                    operation=op,
                )
            previous = position
            for (_, param), value in zip(markers, position, strict=True):
                if value:
                    kwargs[param] = value
                else:
                    kwargs.pop(param, None)

    # -- objects -----------------------------------------------------------
    def put_object(
        self,
        bucket: str,
        key: str,
        body: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        content_type: str = "application/json",
    ) -> str:
        """PUT, optionally conditional; raises PreconditionFailed when the condition fails.

        ``if_match`` is an ETag as the store returned it; it is sent in the form the
        store's profile names (:meth:`StoreProfile.if_match_value`)."""
        kwargs: dict[str, Any] = {
            "Bucket": bucket,
            "Key": key,
            "Body": body,
            "ContentType": content_type,
        }
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            # In the form the store's If-Match takes (Ceph RGW 16: unquoted).
            kwargs["IfMatch"] = self.profile.if_match_value(if_match) if self.profile else if_match
        try:
            return str(self._call("PutObject", _url(bucket, key), len(body), **kwargs)["ETag"])
        except StoreError as exc:
            # If-Match on a missing key: AWS says 404 NoSuchKey, SeaweedFS 412.
            # The original code stays on the error, for the store probes.
            if if_match is not None and exc.code in _MISSING_KEY_CODES:
                raise PreconditionFailed(
                    str(exc), operation="PutObject", code=exc.code, status=exc.status
                ) from exc
            raise

    def get_object(
        self, bucket: str, key: str, *, first_bytes: int | None = None
    ) -> tuple[bytes, str] | None:
        """The body and ETag of an object, or None if there is none; with
        ``first_bytes``, at most that many bytes of its body (a ranged GET)."""
        ranged: dict[str, Any] = {"Range": f"bytes=0-{first_bytes - 1}"} if first_bytes else {}
        where = _url(bucket, key)
        for attempt in range(1, BODY_ATTEMPTS + 1):
            try:
                response = self._call("GetObject", where, Bucket=bucket, Key=key, **ranged)
            except StoreError as exc:
                if exc.code in _MISSING_KEY_CODES:
                    return None
                raise
            try:
                body = response["Body"].read()
            except BotoCoreError as exc:
                # The body was cut short (a connection reset; LocalStack ends the body
                # of an object deleted while it sends it). botocore retries requests,
                # never a body read after the call returned; a GET is safe to repeat,
                # and the object may be gone by then (None).
                self.stats.record(BODY_READ, 0, 0, failed=True)
                if attempt == BODY_ATTEMPTS:
                    raise translate(exc, "GetObject", where) from exc
                log.info("the body of %s was cut short (%s); reading it again", where, exc)
                backoff(attempt, base=0.1, cap=1.0)
                continue
            self.stats.record(BODY_READ, 0, len(body))
            return body, str(response["ETag"])
        raise AssertionError("unreachable")

    def head_object(self, bucket: str, key: str) -> ObjectInfo | None:
        try:
            r = self._call("HeadObject", _url(bucket, key), Bucket=bucket, Key=key)
        except StoreError as exc:
            if exc.code in _MISSING_KEY_CODES:
                return None
            raise
        return ObjectInfo(key, int(r["ContentLength"]), str(r["ETag"]), r.get("LastModified"))

    def list_objects(self, bucket: str, prefix: str, page_size: int = 1000) -> Iterator[ObjectInfo]:
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": page_size}
        # S3: at most 1,000 keys a page.
        for page in self._pages(
            "ListObjectsV2",
            _url(bucket, prefix),
            kwargs,
            ("NextContinuationToken", "ContinuationToken"),
        ):
            for o in page.get("Contents", []):
                yield ObjectInfo(
                    str(o["Key"]), int(o["Size"]), str(o["ETag"]), o.get("LastModified")
                )

    def delete_objects(self, bucket: str, keys: Sequence[str]) -> int:
        """Delete keys in batches of 1,000; missing keys are not an error."""
        deleted = 0
        for i in range(0, len(keys), DELETE_BATCH):
            batch = list(keys[i : i + DELETE_BATCH])
            response = self._call(
                "DeleteObjects",
                f"s3://{bucket} ({len(batch)} keys)",
                Bucket=bucket,
                Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
            )
            errors = response.get("Errors", [])
            if errors:
                first = errors[0]
                raise StoreError(
                    f"DeleteObjects: {len(errors)} key(s) not deleted, first "
                    f"{first.get('Key')!r}: {first.get('Code')} "
                    f"{first.get('Message')}",
                    operation="DeleteObjects",
                    code=str(first.get("Code", "")),
                )
            deleted += len(batch)
        return deleted


_METHODS = {
    "HeadBucket": "head_bucket",
    "CreateMultipartUpload": "create_multipart_upload",
    "UploadPart": "upload_part",
    "CompleteMultipartUpload": "complete_multipart_upload",
    "AbortMultipartUpload": "abort_multipart_upload",
    "ListParts": "list_parts",
    "ListMultipartUploads": "list_multipart_uploads",
    "PutObject": "put_object",
    "GetObject": "get_object",
    "HeadObject": "head_object",
    "ListObjectsV2": "list_objects_v2",
    "DeleteObjects": "delete_objects",
    "GetBucketLifecycleConfiguration": "get_bucket_lifecycle_configuration",
    "PutBucketLifecycleConfiguration": "put_bucket_lifecycle_configuration",
}


def _url(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"
