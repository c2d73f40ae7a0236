"""The S3 store layer: the few S3 calls the protocol makes, over boto3.

Credentials come from boto3's standard chain (environment, profile, instance
role); only an endpoint is ever configured here, so no secret passes through
this module's logs or errors. Every call is counted in a :class:`RequestStats`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

from zero_rename.core.stats import RequestStats
from zero_rename.errors import (
    DestinationError,
    NoSuchUpload,
    PreconditionFailed,
    StoreError,
)

log = logging.getLogger(__name__)

# S3: DeleteObjects takes at most 1,000 keys a request.
DELETE_BATCH = 1000
_CREDENTIAL_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied",
                     "InvalidToken", "ExpiredToken", "403"}
_MISSING_KEY_CODES = {"NoSuchKey", "404", "NotFound"}


@dataclass(frozen=True)
class StoreConfig:
    """How to reach S3. ``endpoint_url`` selects MinIO, Ceph, SeaweedFS...; None means AWS."""

    endpoint_url: str | None = None
    region: str | None = None
    max_pool_connections: int = 64
    max_attempts: int = 6
    connect_timeout: float = 10.0
    # CompleteMultipartUpload "could take several minutes" (S3 API reference).
    read_timeout: float = 300.0
    path_style: bool | None = None


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


def make_client(config: StoreConfig) -> Any:
    """A boto3 S3 client sized and retried for commit work."""
    path_style = config.path_style if config.path_style is not None else bool(config.endpoint_url)
    botocore_config = Config(
        max_pool_connections=config.max_pool_connections,
        # Standard mode retries 5xx, throttling (SlowDown) and timeouts with
        # exponential backoff and jitter; it never retries 409 or 412.
        retries={"mode": "standard", "max_attempts": config.max_attempts},
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        s3={"addressing_style": "path" if path_style else "auto"},
        # Conditional writes need SigV4.
        signature_version="s3v4",
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    session = boto3.session.Session(botocore_session=_botocore_session())
    return session.client("s3", endpoint_url=config.endpoint_url,
                          region_name=config.region or session.region_name or "us-east-1",
                          config=botocore_config)


_LOADER_LOCK = threading.Lock()
_LOADER: Any = None


def _botocore_session() -> Any:
    """A new botocore session (credentials are resolved afresh) sharing one
    loader, so the service models are parsed once a process, not per client."""
    global _LOADER
    session = botocore.session.Session()
    with _LOADER_LOCK:
        if _LOADER is None:
            _LOADER = session.get_component("data_loader")
        else:
            session.register_component("data_loader", _LOADER)
    return session


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def translate(exc: Exception, op: str, where: str) -> Exception:
    """Turn a botocore error into one of ours; the message names the call and the key."""
    if isinstance(exc, ClientError):
        code, status = _code(exc), _status(exc)
        message = exc.response.get("Error", {}).get("Message", "") or str(exc)
        text = f"{op} {where}: {code or status} {message}".strip()
        if code == "PreconditionFailed" or status == 412:
            return PreconditionFailed(text, operation=op, code="PreconditionFailed")
        if code == "NoSuchUpload":
            return NoSuchUpload(text, operation=op, code=code)
        if code == "NoSuchBucket":
            return DestinationError(f"bucket does not exist ({text}); create it or fix the destination")
        if code in _CREDENTIAL_CODES:
            return DestinationError(f"access refused ({text}); check the credentials and bucket policy")
        return StoreError(text, operation=op, code=code)
    if isinstance(exc, EndpointConnectionError):
        return StoreError(f"{op} {where}: cannot reach the S3 endpoint ({exc})", operation=op)
    if isinstance(exc, BotoCoreError):
        return StoreError(f"{op} {where}: {exc}", operation=op)
    return exc


class S3Store:
    """The protocol's S3 operations on one client, counted into ``stats``."""

    def __init__(self, client: Any, stats: RequestStats | None = None) -> None:
        self.client = client
        self.stats = stats if stats is not None else RequestStats()

    @classmethod
    def connect(cls, config: StoreConfig | None = None) -> S3Store:
        return cls(make_client(config or StoreConfig()))

    def scoped(self, stats: RequestStats | None = None) -> S3Store:
        """The same connection pool, counting into other statistics (a task's, a job's)."""
        return S3Store(self.client, stats if stats is not None else RequestStats())

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
            raise translate(exc, op, where) from exc
        retries = int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0))
        self.stats.record(op, time.perf_counter_ns() - start, nbytes, retries)
        return response

    # -- buckets -----------------------------------------------------------
    def check_bucket(self, bucket: str) -> None:
        """Raises DestinationError when the bucket is missing or not ours to write."""
        try:
            self._call("HeadBucket", f"s3://{bucket}", Bucket=bucket)
        except StoreError as exc:
            if exc.code in ("404", "NoSuchBucket"):
                raise DestinationError(f"bucket {bucket!r} does not exist; create it first") from exc
            raise

    # -- multipart uploads -------------------------------------------------
    def create_upload(self, bucket: str, key: str) -> str:
        return str(self._call("CreateMultipartUpload", _url(bucket, key), Bucket=bucket,
                              Key=key)["UploadId"])

    def upload_part(self, bucket: str, key: str, upload_id: str, number: int,
                    body: bytes) -> str:
        response = self._call("UploadPart", _url(bucket, key), len(body), Bucket=bucket,
                              Key=key, UploadId=upload_id, PartNumber=number, Body=body)
        return str(response["ETag"])

    def complete_upload(self, bucket: str, key: str, upload_id: str,
                        parts: Sequence[tuple[int, str]]) -> str:
        response = self._call(
            "CompleteMultipartUpload", _url(bucket, key), Bucket=bucket, Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in parts]})
        return str(response.get("ETag", ""))

    def abort_upload(self, bucket: str, key: str, upload_id: str) -> bool:
        """Abort a pending upload; False if it was no longer pending."""
        try:
            self._call("AbortMultipartUpload", _url(bucket, key), Bucket=bucket, Key=key,
                       UploadId=upload_id)
            return True
        except NoSuchUpload:
            return False

    def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        parts: list[PartInfo] = []
        marker = 0
        while True:  # S3: at most 1,000 parts a page.
            response = self._call("ListParts", _url(bucket, key), Bucket=bucket, Key=key,
                                  UploadId=upload_id, PartNumberMarker=marker)
            parts += [PartInfo(int(p["PartNumber"]), str(p["ETag"]), int(p["Size"]))
                      for p in response.get("Parts", [])]
            if not response.get("IsTruncated"):
                return parts
            marker = int(response["NextPartNumberMarker"])

    def list_uploads(self, bucket: str, prefix: str, page_size: int = 1000) -> Iterator[UploadInfo]:
        """Pending uploads whose keys start with ``prefix``, which must end in '/'."""
        if not prefix.endswith("/"):
            raise ValueError(f"upload listing prefix {prefix!r} must end in '/'")
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxUploads": page_size}
        while True:  # S3: at most 1,000 uploads a page.
            response = self._call("ListMultipartUploads", _url(bucket, prefix), **kwargs)
            for u in response.get("Uploads", []):
                yield UploadInfo(str(u["Key"]), str(u["UploadId"]), u.get("Initiated"))
            if not response.get("IsTruncated"):
                return
            kwargs["KeyMarker"] = response.get("NextKeyMarker", "")
            kwargs["UploadIdMarker"] = response.get("NextUploadIdMarker", "")

    # -- objects -----------------------------------------------------------
    def put_object(self, bucket: str, key: str, body: bytes, *, if_none_match: bool = False,
                   if_match: str | None = None, content_type: str = "application/json") -> str:
        """PUT, optionally conditional; raises PreconditionFailed when the condition fails."""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "Body": body,
                                  "ContentType": content_type}
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = if_match
        try:
            return str(self._call("PutObject", _url(bucket, key), len(body), **kwargs)["ETag"])
        except StoreError as exc:
            # If-Match on a missing key: AWS says 404 NoSuchKey, SeaweedFS 412.
            if if_match is not None and exc.code in _MISSING_KEY_CODES:
                raise PreconditionFailed(str(exc), operation="PutObject",
                                         code="PreconditionFailed") from exc
            raise

    def get_object(self, bucket: str, key: str) -> tuple[bytes, str] | None:
        """The body and ETag of an object, or None if there is none."""
        try:
            response = self._call("GetObject", _url(bucket, key), Bucket=bucket, Key=key)
        except StoreError as exc:
            if exc.code in _MISSING_KEY_CODES:
                return None
            raise
        body = response["Body"].read()
        self.stats.record("GetObject.read", 0, len(body))
        return body, str(response["ETag"])

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
        while True:  # S3: at most 1,000 keys a page.
            response = self._call("ListObjectsV2", _url(bucket, prefix), **kwargs)
            for o in response.get("Contents", []):
                yield ObjectInfo(str(o["Key"]), int(o["Size"]), str(o["ETag"]),
                                 o.get("LastModified"))
            if not response.get("IsTruncated"):
                return
            kwargs["ContinuationToken"] = response["NextContinuationToken"]

    def delete_objects(self, bucket: str, keys: Sequence[str]) -> int:
        """Delete keys in batches of 1,000; missing keys are not an error."""
        deleted = 0
        for i in range(0, len(keys), DELETE_BATCH):
            batch = list(keys[i : i + DELETE_BATCH])
            response = self._call("DeleteObjects", f"s3://{bucket} ({len(batch)} keys)",
                                  Bucket=bucket, Delete={
                                      "Objects": [{"Key": k} for k in batch], "Quiet": True})
            errors = response.get("Errors", [])
            if errors:
                first = errors[0]
                raise StoreError(f"DeleteObjects: {len(errors)} key(s) not deleted, first "
                                 f"{first.get('Key')!r}: {first.get('Code')} {first.get('Message')}",
                                 operation="DeleteObjects", code=str(first.get("Code", "")))
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
}


def _url(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"
