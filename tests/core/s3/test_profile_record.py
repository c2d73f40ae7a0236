"""The store profile kept beside a destination: read, trusted only when it is this
store's and fresh, probed again otherwise, and never a credential in it."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.s3proxy import S3Proxy, round_trips
from zero_rename.core.committer import Committer
from zero_rename.core.data.layout import Destination
from zero_rename.core.s3 import probes, profile_record
from zero_rename.core.s3.client import StoreConfig
from zero_rename.core.s3.profile_record import (
    MAX_RECORD_BYTES,
    RECORD_KIND,
    RECORD_VERSION,
    ProfileRecord,
    StoreIdentity,
    judge,
)
from zero_rename.core.s3.profiles import PROFILES, StoreProfile

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
SITE = Destination.parse("s3://bucket/table")
PROBED = StoreProfile(name="auto", if_match_missing="412", uploads_by_prefix=False)


@dataclass
class _Store:
    """What the record is judged against: the store's identity and the age setting."""

    endpoint_url: str = "http://127.0.0.1:8333"
    region: str = "us-east-1"
    server: str = "SeaweedFS 4.48"
    config: StoreConfig | None = None


def _body(**changes: Any) -> bytes:
    record: dict[str, Any] = json.loads(
        ProfileRecord(
            kind=RECORD_KIND,
            version=RECORD_VERSION,
            probe_version=probes.PROBE_VERSION,
            destination=SITE.url,
            store=StoreIdentity(
                endpoint="http://127.0.0.1:8333", region="us-east-1", server="SeaweedFS 4.48"
            ),
            probed=NOW - timedelta(hours=1),
            max_age_seconds=86400,
            profile=PROBED,
        ).model_dump_json()
    )
    for path, value in changes.items():
        *parents, last = path.split("__")
        place = record
        for name in parents:
            place = place[name]
        place[last] = value
    return json.dumps(record).encode()


def _judged(body: bytes, store: _Store | None = None) -> str:
    why, record = judge(body, store or _Store(), SITE, probes.PROBE_VERSION, NOW)  # type: ignore[arg-type]
    assert (record is None) == bool(why)
    return why


@pytest.mark.unit
def test_a_fresh_record_of_this_store_is_used() -> None:
    why, record = judge(_body(), _Store(), SITE, probes.PROBE_VERSION, NOW)  # type: ignore[arg-type]
    assert why == "" and record is not None and record.profile == PROBED


@pytest.mark.unit
@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"store__endpoint": "http://10.0.0.9:9000"}, "another store"),
        ({"store__server": "MinIO"}, "another store"),
        ({"store__region": "eu-west-1"}, "another store"),
        ({"destination": "s3://bucket/other"}, "another destination"),
        ({"probe_version": probes.PROBE_VERSION + 1}, "probe"),
        ({"version": RECORD_VERSION + 1}, "format version"),
        ({"kind": "something-else"}, "not a store profile record"),
        ({"probed": (NOW + timedelta(days=2)).isoformat()}, "future"),
        ({"profile__conditional_create": False}, "not a probed one"),
        ({"profile__name": "aws"}, "not a probed one"),
        ({"profile__if_match_form": "sideways"}, "not a valid"),
        ({"aws_secret_access_key": "x"}, "not a valid"),
        ({"max_age_seconds": -1}, "not a valid"),
        ({"max_age_seconds": 1e300}, "not a valid"),
        ({"max_age_seconds": float("inf")}, "not a valid"),
        ({"max_age_seconds": float("nan")}, "not a valid"),
        ({"probed": "9999-12-31T23:59:59Z"}, "future"),
        ({"probed": "0001-01-01T00:00:00"}, "stale"),
        ({"probed": "yesterday"}, "not a valid"),
    ],
)
def test_a_foreign_or_wrong_record_is_not_trusted(changes: dict[str, Any], reason: str) -> None:
    assert reason in _judged(_body(**changes))


@pytest.mark.unit
@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\xff\xfe not text",
        b"not json",
        b"[1, 2]",
        b"null",
        b"[" * 10_000 + b"]" * 10_000,
        b'{"kind": "' + b"x" * MAX_RECORD_BYTES + b'"}',
        b'{"kind": "zero-rename-store-profile"}',
    ],
)
def test_hostile_content_is_refused_without_a_crash(body: bytes) -> None:
    assert _judged(body)


@pytest.mark.unit
def test_age_is_the_smaller_of_the_records_and_the_readers() -> None:
    day_old = _body(probed=(NOW - timedelta(hours=25)).isoformat())
    assert _judged(day_old) == "stale"
    # A record cannot keep itself forever by saying so.
    forever = _body(max_age_seconds=1e9, probed=(NOW - timedelta(hours=25)).isoformat())
    assert _judged(forever) == "stale"
    hour = _Store(config=StoreConfig(profile_max_age=600))
    assert _judged(_body(), hour) == "stale"
    assert _judged(_body(max_age_seconds=60)) == "stale"


@pytest.mark.unit
def test_the_age_setting_is_checked() -> None:
    from zero_rename.errors import ConfigError

    for bad in (-1, "1h", True, float("nan")):
        with pytest.raises(ConfigError, match="profile_max_age"):
            StoreConfig(profile_max_age=bad)  # type: ignore[arg-type]


# -- on a real store, at the wire ---------------------------------------------

_SETUP = """
import sys
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import StoreConfig
Committer(sys.argv[1], StoreConfig(endpoint_url=sys.argv[2])).setup_job({})
"""
_PROBE_ONLY = ("CreateMultipartUpload", "AbortMultipartUpload", "DeleteObjects")


def _setup_in_a_fresh_process(dest: str, proxy: S3Proxy) -> dict[str, int]:
    """Job setup in a new interpreter, as Spark's driver-side worker runs it: the
    requests it sent, by operation, as the proxy received them."""
    before = proxy.counts
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    subprocess.run(
        [sys.executable, "-c", _SETUP, dest, proxy.endpoint_url], env=env, check=True, timeout=120
    )
    return dict(proxy.counts - before)


@pytest.mark.s3
def test_a_second_write_in_a_fresh_process_sends_no_probe(
    proxy: S3Proxy, dest: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = StoreConfig(endpoint_url=proxy.endpoint_url)
    committer = Committer(dest, config)
    site, store = committer.dest, committer.store
    key = profile_record.record_key(site)
    probes._DETECTED.clear()
    first = dict(proxy.counts)
    committer.setup_job({})
    assert all(first.get(op, 0) < proxy.counts[op] for op in _PROBE_ONLY), proxy.counts
    found = store.get_object(site.bucket, key)
    assert found is not None
    text = found[0].decode()
    assert PROFILES["seaweedfs"].if_match_missing in text
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in text
    assert "credential" not in text and "secret" not in text.lower()

    second = _setup_in_a_fresh_process(dest, proxy)
    assert not any(op in second for op in _PROBE_ONLY), second
    # The record's GET, the bucket check, the job record's PUT and the listings of
    # job setup; the probe alone is eleven or more.
    assert sum(second.values()) <= 6, second

    # A stale record, and a foreign one, are probed again (and replaced); in this
    # process, its own cache cleared, as a fresh one would start.
    record = json.loads(text)
    for changes in (
        {"probed": (datetime.now(UTC) - timedelta(days=2)).isoformat()},
        {"store": {**record["store"], "endpoint": "https://s3.elsewhere.example"}},
    ):
        store.put_object(site.bucket, key, json.dumps({**record, **changes}).encode())
        probes._DETECTED.clear()
        before = proxy.counts
        with caplog.at_level(logging.INFO, logger="zero_rename"):
            committer.setup_job({})
        assert all(op in proxy.counts - before for op in _PROBE_ONLY), proxy.counts - before
        renewed = store.get_object(site.bucket, key)
        assert renewed is not None and json.loads(renewed[0])["probed"] > record["probed"]
    assert "describes another store" in caplog.text and "is stale" in caplog.text

    # An empty record and one too large to be one are replaced, not left to be
    # probed past at every job.
    for body in (b"", b" " * (MAX_RECORD_BYTES + 1)):
        store.put_object(site.bucket, key, body)
        probes._DETECTED.clear()
        committer.setup_job({})
        kept = store.get_object(site.bucket, key)
        assert kept is not None and json.loads(kept[0])["kind"] == RECORD_KIND


DELAY = 0.2  # a store's answer time, at the proxy: rounds stand apart by it


@pytest.mark.s3
def test_job_setup_sends_the_destinations_checks_beside_the_records_read(
    proxy: S3Proxy, dest: str
) -> None:
    """A daily job's setup (its profile record kept, a fresh process): the bucket's
    and the destination's HEADs and the record's GET in one round trip, then the
    job record's conditional PUT. Two rounds where there were four."""
    committer = Committer(dest, StoreConfig(endpoint_url=proxy.endpoint_url))
    daily = {"partition_columns": "dt", "conflict_mode": "replace"}
    committer.setup_job(daily)  # the day before's: it keeps the profile record
    probes._DETECTED.clear()  # as a fresh process starts
    proxy.add("*", "delay", times=None, seconds=DELAY)
    proxy.record_arrivals()
    proxy.reset_counts()
    committer.setup_job(daily)
    assert round_trips(proxy.arrivals, DELAY) == [
        ["GetObject", "HeadBucket", "HeadObject"],
        ["PutObject"],
    ]
