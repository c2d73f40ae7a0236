"""Pending uploads listed in one answer, read as a stream.

SeaweedFS keeps a bucket's pending uploads in one directory and scans all of
it for every ListMultipartUploads page it serves, paging by
``NextUploadIdMarker`` alone. With a million uploads pending that is about a
page of 1,000 a minute, some 16 hours for one listing. It caps an answer at
10,000 uploads when not told otherwise, but honours a larger ``MaxUploads``:
asked for up to :data:`ANSWER_UPLOADS`, a million pending uploads come from
one scan. botocore would read such an answer whole and parse it into a dict
per upload (gigabytes at a million), so here the request is presigned by the
store's own client (its credentials, endpoint and addressing), sent over a
connection of its own (:mod:`.transport`), and the answer parsed as it
arrives, an upload at a time, in constant memory.
"""

from __future__ import annotations

import logging
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit

from zero_rename.core.s3.backoff import backoff
from zero_rename.core.s3.http import ca_file, child_text, direct_unsupported, local_name
from zero_rename.core.s3.stats import RequestStats
from zero_rename.core.s3.transport import ConnectionPool, TransportError
from zero_rename.errors import StoreError

log = logging.getLogger(__name__)

OPERATION = "ListMultipartUploads"
# Uploads asked for in one answer. A store that pages by upload id alone
# (SeaweedFS) returns that many from one scan; one answer of a million
# uploads is about 300 MB of XML, which the store builds in its memory.
ANSWER_UPLOADS = 1_000_000
# The presigned request only has to be valid when the store receives it.
_EXPIRES = 900
# Bytes read from the socket at a time.
_CHUNK = 1 << 16
# An error answer is small; more than this is not read.
_ERROR_BYTES = 1 << 16


# A pending upload as listed: key, upload id, when it was initiated.
Listed = tuple[str, str, "datetime | None"]


@dataclass(frozen=True)
class Timeouts:
    """The client's own limits, so a streamed request waits and retries as its
    botocore requests would."""

    connect: float
    read: float
    attempts: int

    @classmethod
    def of(cls, client: Any) -> Timeouts:
        config = client.meta.config
        retries = config.retries or {}
        attempts = retries.get("total_max_attempts") or retries.get("max_attempts", 2) + 1
        return cls(float(config.connect_timeout), float(config.read_timeout), int(attempts))


def streaming_unsupported(client: Any) -> str | None:
    """Why the answer cannot be fetched where botocore would fetch it, or None."""
    if not str(client.meta.endpoint_url).startswith(("http://", "https://")):
        return f"endpoint {client.meta.endpoint_url!r} is not http(s)"
    return direct_unsupported(str(client.meta.endpoint_url))


def streamed_uploads(
    client: Any, stats: RequestStats, bucket: str, prefix: str | None
) -> Iterator[Listed]:
    """Every pending upload under ``prefix`` (the whole bucket when None), as the
    store lists it, one request per answer it gives.

    A store that does cap the answer must say where to continue from, as the
    paged listing requires; one that says nothing is refused the same way.
    A failed request is retried from the start, so an upload may be yielded
    more than once: callers either tolerate repeats or remember what they saw.
    """
    limits = Timeouts.of(client)
    markers: dict[str, str] = {}
    previous: tuple[str, str] | None = None
    while True:
        answer = _Answer()
        yield from _fetch(client, limits, stats, bucket, prefix, markers, answer)
        if not answer.truncated:
            return
        position = (answer.next_key, answer.next_upload_id)
        if not any(position):
            raise StoreError(
                f"{OPERATION} s3://{bucket}/{prefix or ''}: the store says the "
                "listing is truncated but gives no marker to continue from; "
                "refusing to act on part of it",
                operation=OPERATION,
            )
        if position == previous:
            raise StoreError(
                f"{OPERATION} s3://{bucket}/{prefix or ''}: the listing does not "
                f"advance past {position!r}; refusing to loop",
                operation=OPERATION,
            )
        previous = position
        markers = {
            k: v for k, v in (("KeyMarker", position[0]), ("UploadIdMarker", position[1])) if v
        }


class _Answer:
    """What one answer said besides its uploads."""

    def __init__(self) -> None:
        self.truncated = False
        self.next_key = ""
        self.next_upload_id = ""
        self.url_encoded = False


def _fetch(
    client: Any,
    limits: Timeouts,
    stats: RequestStats,
    bucket: str,
    prefix: str | None,
    markers: dict[str, str],
    answer: _Answer,
) -> Iterator[Listed]:
    params: dict[str, Any] = {"Bucket": bucket, "MaxUploads": ANSWER_UPLOADS, **markers}
    if prefix is not None:
        params["Prefix"] = prefix
    where = f"s3://{bucket}/{prefix or ''}"
    for attempt in range(1, limits.attempts + 1):
        start = time.perf_counter_ns()
        url = client.generate_presigned_url(
            "list_multipart_uploads", Params=params, ExpiresIn=_EXPIRES
        )
        try:
            count = 0
            for upload in _read(url, limits, answer):
                count += 1
                yield upload
            stats.record(OPERATION, time.perf_counter_ns() - start, retries=attempt - 1)
            log.debug("listed %d pending upload(s) under %s in one answer", count, where)
            return
        except (TransportError, ET.ParseError, _Transient) as exc:
            # No answer, half of one (a cut body does not parse), or a 5xx.
            if attempt == limits.attempts:
                stats.record(
                    OPERATION, time.perf_counter_ns() - start, retries=attempt - 1, failed=True
                )
                raise StoreError(f"{OPERATION} {where}: {exc}", operation=OPERATION) from exc
            log.warning("listing pending uploads under %s failed (%s); listing again", where, exc)
            # Full jitter, as botocore's standard mode backs off: many listings
            # refused by one throttled store do not all ask again in step.
            backoff(attempt, base=1.0, cap=20.0)


class _Transient(Exception):
    """A 5xx or throttling answer: worth asking again."""


def _read(url: str, limits: Timeouts, answer: _Answer) -> Iterator[Listed]:
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    pool = ConnectionPool(
        origin,
        maxsize=1,
        connect_timeout=limits.connect,
        read_timeout=limits.read,
        ca_file=ca_file(parts.scheme),
    )
    with pool.stream("GET", url[len(origin) :], chunk=_CHUNK) as response:
        if response.status != 200:
            _refuse(response, url)
        yield from _parse(response.chunks(), answer)


def _refuse(response: Any, url: str) -> None:
    body = response.read(_ERROR_BYTES)
    code = message = ""
    try:
        root = ET.fromstring(body)
        code = child_text(root, "Code")
        message = child_text(root, "Message")
    except ET.ParseError:
        message = body[:200].decode("utf-8", "replace")
    text = f"{response.status} {code} {message}".strip()
    if response.status >= 500 or code in ("SlowDown", "Throttling", "RequestTimeout"):
        raise _Transient(text)
    where = urlsplit(url)._replace(query="").geturl()  # the signature stays out of errors
    raise StoreError(
        f"{OPERATION} {where}: {text}", operation=OPERATION, code=code, status=response.status
    )


def _parse(chunks: Iterator[bytes], answer: _Answer) -> Iterator[Listed]:
    """Uploads as their elements end; each is dropped once read, so memory holds
    one upload however long the answer."""
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    depth = 0
    root: ET.Element | None = None
    for chunk in chunks:
        parser.feed(chunk)
        for item in parser.read_events():
            event, element = item[0], item[-1]
            if not isinstance(element, ET.Element):  # namespace events: not asked for
                continue
            if event == "start":
                depth += 1
                if root is None:
                    root = element
                continue
            depth -= 1
            if depth != 1 or root is None:
                continue
            upload = _top_level(element, answer)
            root.remove(element)
            if upload is not None:
                yield upload
    parser.close()
    if root is None or local_name(root.tag) != "ListMultipartUploadsResult":
        raise _Transient(
            f"the answer is not a ListMultipartUploadsResult "
            f"({local_name(root.tag) if root is not None else 'empty'})"
        )


def _initiated(text: str) -> datetime | None:
    """An upload's start time: in UTC when the store names no zone, None when it
    gives none or no time at all (such an upload is never old enough to sweep)."""
    try:
        found = datetime.fromisoformat(text) if text else None
    except ValueError:
        return None
    return found.replace(tzinfo=UTC) if found is not None and found.tzinfo is None else found


def _top_level(element: ET.Element, answer: _Answer) -> Listed | None:
    name = local_name(element.tag)
    text = element.text or ""
    if name == "Upload":
        key = child_text(element, "Key")
        if answer.url_encoded:
            key = unquote(key)
        initiated = child_text(element, "Initiated")
        return (
            key,
            child_text(element, "UploadId"),
            _initiated(initiated),
        )
    if name == "IsTruncated":
        answer.truncated = text.strip().lower() == "true"
    elif name == "NextKeyMarker":
        answer.next_key = text
    elif name == "NextUploadIdMarker":
        answer.next_upload_id = text
    elif name == "EncodingType":
        answer.url_encoded = text.strip().lower() == "url"
    return None
