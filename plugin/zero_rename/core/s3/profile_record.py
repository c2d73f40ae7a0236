"""The store's probed profile, kept beside a destination between processes.

Probing a store (:func:`zero_rename.core.s3.probes.detect`) takes eleven or
twelve requests, one after the other, and Spark runs every write's job setup
in a fresh Python worker, so a per-process cache alone saves nothing there.
The profile is therefore kept in ``_zero_rename/store-profile.json`` under the
destination: one GET at job setup reads it, and a probe runs only where the
record is missing, stale or not this store's, after which a conditional write
(create if absent, else compare-and-swap with the ETag read) leaves the new
one. Losing that write to another process is fine: both probed the same store.

The record is a cache, never an authority. It names the store it describes
(endpoint, region, the Server header of its answers; never a credential), the
probe's version and when it was probed; a record that is unreadable, too large,
of another format, version or probe, another destination's or store's, from
the future, or older than the reader's maximum age (the smaller of the record's
and the reader's), is ignored with a warning (stale: a note) and the store is
probed again. Whoever can write it can write the job records beside it, which
the protocol trusts as much.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from pydantic import BaseModel, Field, ValidationError

from zero_rename.core.s3.client import S3Store
from zero_rename.core.s3.profiles import AUTO, StoreProfile
from zero_rename.core.s3.redact import shown_url
from zero_rename.errors import PreconditionFailed, StoreError
from zero_rename.frozen import frozen

log = logging.getLogger(__name__)

RECORD_NAME = "store-profile.json"
RECORD_KIND = "zero-rename-store-profile"
RECORD_VERSION = 1
# A record is a few hundred bytes; more than this is not one of ours, and is
# not read past this (a ranged GET).
MAX_RECORD_BYTES = 16 * 1024
# How long a probed profile is kept, unless StoreConfig.profile_max_age says.
DEFAULT_MAX_AGE = timedelta(hours=24)
# Clocks differ: a record this far in the future still counts as just written.
_CLOCK_SKEW = timedelta(minutes=5)


class RecordSite(Protocol):
    """A destination's bucket and a directory readers skip (its hidden directory),
    where the record and the probes' scratch objects go; ``url`` names it in
    messages."""

    @property
    def bucket(self) -> str: ...

    @property
    def hidden_dir(self) -> str: ...

    @property
    def url(self) -> str: ...


class StoreIdentity(BaseModel):
    """Which store answered: what a record must match to be this store's."""

    model_config = frozen()

    endpoint: str = Field(max_length=1000)
    region: str = Field(max_length=100)
    server: str = Field(max_length=200)


class ProfileRecord(BaseModel):
    """The record's content, as written and as validated on reading."""

    model_config = frozen()

    kind: str
    version: int
    probe_version: int
    destination: str = Field(max_length=2000)
    store: StoreIdentity
    probed: datetime
    # At most about 31 years: a larger one (or Infinity, which JSON parsers take)
    # would overflow the arithmetic of its age.
    max_age_seconds: float = Field(gt=0, le=1e9, allow_inf_nan=False)
    profile: StoreProfile


def record_key(site: RecordSite) -> str:
    return site.hidden_dir + RECORD_NAME


def identity(store: S3Store) -> StoreIdentity:
    """The store as its record names it; the endpoint as shown in messages (it
    never holds credentials: :func:`zero_rename.core.s3.client.check_endpoint`)."""
    return StoreIdentity(
        endpoint=shown_url(store.endpoint_url), region=store.region, server=store.server
    )


def max_age(store: S3Store) -> timedelta:
    """How long this process keeps a probed profile (0: no record at all)."""
    seconds = store.config.profile_max_age if store.config else None
    return DEFAULT_MAX_AGE if seconds is None else timedelta(seconds=seconds)


def read_record(
    store: S3Store, site: RecordSite, probe_version: int, now: datetime
) -> tuple[StoreProfile | None, str | None]:
    """The profile the record keeps, if it can be used, and the record's ETag
    (None: there is none), for the conditional write that replaces it."""
    key = record_key(site)
    try:
        found = _get(store, site.bucket, key)
    except StoreError as exc:
        _ignore(site, f"it could not be read ({exc.code or exc.status or 'error'})")
        return None, None
    if found is None:
        return None, None
    body, etag = found
    why, record = judge(body, store, site, probe_version, now)
    if record is not None:
        return record.profile, etag
    if why == "stale":
        log.info("the store profile record of %s is stale; probing the store again", site.url)
    else:
        _ignore(site, why)
    return None, etag


def _get(store: S3Store, bucket: str, key: str) -> tuple[bytes, str] | None:
    """The record's first bytes and its ETag; an empty object (no first byte to
    range over: 416) is read whole, so that its ETag lets it be replaced."""
    try:
        return store.get_object(bucket, key, first_bytes=MAX_RECORD_BYTES)
    except StoreError as exc:
        if exc.status != 416:
            raise
    return store.get_object(bucket, key)


def judge(
    body: bytes, store: S3Store, site: RecordSite, probe_version: int, now: datetime
) -> tuple[str, ProfileRecord | None]:
    """The record ``body`` holds if it describes this store now, else why not
    ("stale" for one that is only too old)."""
    why, record = _parse(body)
    if record is None:
        return why, None
    why = _mismatch(record, store, site, probe_version)
    if why:
        return why, None
    probed = record.probed if record.probed.tzinfo else record.probed.replace(tzinfo=UTC)
    if probed > now + _CLOCK_SKEW:
        return "it says it was probed in the future", None
    kept = min(timedelta(seconds=record.max_age_seconds), max_age(store))
    if now - probed > kept:
        return "stale", None
    return "", record


def _parse(body: bytes) -> tuple[str, ProfileRecord | None]:
    if len(body) >= MAX_RECORD_BYTES:
        return "it is too large to be one", None
    try:
        data: Any = json.loads(body)
        if not isinstance(data, dict) or data.get("kind") != RECORD_KIND:
            return "it is not a store profile record", None
        return "", ProfileRecord.model_validate(data)
    except (ValueError, RecursionError, ValidationError):  # UnicodeDecodeError is a ValueError
        return "it is not a valid store profile record", None


def _mismatch(record: ProfileRecord, store: S3Store, site: RecordSite, probe_version: int) -> str:
    """Why the record is not this destination's, store's and probe's; "" if it is."""
    if record.version != RECORD_VERSION:
        return f"its format version is not {RECORD_VERSION}"
    if record.probe_version != probe_version:
        return "an earlier or later probe wrote it"
    if record.destination != site.url:
        return "it was written for another destination"
    if record.store != identity(store):
        return "it describes another store (endpoint, region or server)"
    if record.profile.name != AUTO or record.profile.problems():
        return "its profile is not a probed one this committer runs on"
    return ""


def write_record(
    store: S3Store,
    site: RecordSite,
    profile: StoreProfile,
    probe_version: int,
    now: datetime,
    etag: str | None,
) -> None:
    """Keep ``profile`` for the next process: created if ``etag`` is None, else
    swapped for the record of that ETag. Best effort: a lost race or a refused
    write leaves the job as it is (it has its profile)."""
    record = ProfileRecord(
        kind=RECORD_KIND,
        version=RECORD_VERSION,
        probe_version=probe_version,
        destination=site.url,
        store=identity(store),
        probed=now,
        max_age_seconds=max_age(store).total_seconds(),
        profile=profile,
    )
    body = record.model_dump_json(indent=1).encode("utf-8")
    try:
        if etag is None:
            store.put_object(site.bucket, record_key(site), body, if_none_match=True)
        else:
            store.put_object(site.bucket, record_key(site), body, if_match=etag)
    except PreconditionFailed:
        log.info("another process kept the store profile of %s first", site.url)
    except StoreError as exc:
        log.warning(
            "could not keep the store profile of %s at %s (%s); the next job probes again",
            site.url,
            record_key(site),
            exc.code or exc.status or "error",
        )


def _ignore(site: RecordSite, why: str) -> None:
    log.warning(
        "ignoring the store profile record s3://%s/%s: %s; probing the store again",
        site.bucket,
        record_key(site),
        why,
    )
