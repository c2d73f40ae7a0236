"""``zero-rename doctor`` against each S3 implementation of the suite, as a user runs it,
and (opt-in: ``ZERO_RENAME_TEST_CEPH=1``) against Ceph RGW 16."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.helpers import pending_in_bucket
from tests.servers import CephRGW, S3Server
from tests.whole_job import assert_committed_once, run_job
from zero_rename.cli.main import main
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import StoreConfig
from zero_rename.core.s3.races import RACE_ROUNDS

pytestmark = pytest.mark.s3

# What each server answers where stores differ (see s3-semantics in the docs).
EXPECTED = {
    "seaweedfs": {"if_match_missing": "412", "recomplete": "same-etag"},
    "moto": {"if_match_missing": "404", "recomplete": "same-etag"},
    "localstack": {"if_match_missing": "404", "recomplete": "no-such-upload"},
}
# Racing conditional writes to one key wait on a per-key lock in SeaweedFS, a
# second or more a round: one round there, the doctor's default elsewhere.
ROUNDS = {"seaweedfs": 1}
# moto checks a condition and writes in two steps without a lock (tests/conftest.py,
# atomic_writes): a race it loses is moto's, and the doctor must then say so.
RACY = {"moto"}


@pytest.mark.every_backend
def test_doctor_on_each_server(
    s3_backend: S3Server,
    committer: Committer,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    backend = request.node.callspec.params["s3_backend"]
    rounds = ROUNDS.get(backend, RACE_ROUNDS)
    argv = ["--endpoint-url", s3_backend.endpoint_url, "doctor", committer.dest.url, "--json"]
    code = main([*argv, "--race-rounds", str(rounds)])
    data = json.loads(capsys.readouterr().out)
    profile, races = data["profile"], data["races"]
    assert profile["conditional_create"] and profile["conditional_replace"]
    assert profile["if_match_form"] == "as-returned"
    assert data["if_match_forms"] == ["as-returned", "unquoted"]
    assert profile["uploads_by_prefix"]
    for field, value in EXPECTED[backend].items():
        assert profile[field] == value, (field, profile)
    assert set(races) == {"create", "swap", "complete"}
    assert [r["rounds"] for r in races.values()] == [rounds] * 3
    assert all(min(r["winners"]) >= 1 for r in races.values()), races
    lost = [name for name in ("create", "swap") if not races[name]["atomic"]]
    if lost and backend in RACY:
        assert code == 1 and data["safe"] is False and len(data["problems"]) == len(lost)
    else:
        assert code == 0 and data["safe"] is True and not lost, data
    assert list(committer.store.list_objects(committer.dest.bucket, committer.dest.dir)) == []
    assert pending_in_bucket(committer) == []


@pytest.mark.ceph
def test_doctor_and_a_job_on_ceph_rgw_16(
    ceph_rgw: CephRGW, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ceph RGW 16 refuses every If-Match whose ETag is quoted, and ignores conditional
    completes: the doctor finds the unquoted form and calls the store safe, and a
    whole job commits on it, where it used to give up after 20 rounds of swaps."""
    for name, value in ceph_rgw.environment().items():
        monkeypatch.setenv(name, value)
    bucket = f"zr-ceph-{uuid.uuid4().hex[:8]}"
    ceph_rgw.create_bucket(bucket)
    dest = f"s3://{bucket}/table"
    code = main(["--endpoint-url", ceph_rgw.endpoint_url, "doctor", dest, "--json"])
    data = json.loads(capsys.readouterr().out)
    profile, races = data["profile"], data["races"]
    assert code == 0 and data["safe"] is True, data
    assert profile["if_match_form"] == "unquoted" and data["if_match_forms"] == ["unquoted"]
    assert profile["conditional_complete"] is False and "complete" not in races
    assert races["create"]["atomic"] and races["swap"]["atomic"], races
    assert data["like"] == ["ceph"]
    committer = Committer(dest, StoreConfig(endpoint_url=ceph_rgw.endpoint_url))
    assert_committed_once(committer, run_job(committer, losing_attempt=True))
