"""Store profiles: the ETag form of If-Match, and what job records keep of it."""

from __future__ import annotations

import json
from dataclasses import replace

from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import S3Store, StoreConfig, declared_profile
from zero_rename.core.s3.profiles import PROFILES, StoreProfile, named_profile

ETAG = '"9b2cf535f27731c974343645a3985328"'


def test_if_match_carries_the_etag_in_the_profiles_form() -> None:
    assert named_profile("aws").if_match_value(ETAG) == ETAG
    assert named_profile("ceph").if_match_value(ETAG) == ETAG.strip('"')
    refused = StoreProfile(name="auto", if_match_form="refused")
    assert "no compare-and-swap could succeed" in " ".join(refused.problems())
    assert [n for n, p in PROFILES.items() if p.if_match_form != "as-returned"] == ["ceph"]


def test_records_leave_the_default_form_out() -> None:
    """Earlier versions forbid unknown fields in a job record's profile: the default
    form is left out, so only a record of a store needing unquoted ETags (which
    earlier versions could not commit on) carries it."""
    aws = json.loads(named_profile("aws").model_dump_json())
    assert "if_match_form" not in aws and StoreProfile.model_validate(aws) == named_profile("aws")
    ceph = json.loads(named_profile("ceph").model_dump_json())
    assert ceph["if_match_form"] == "unquoted"
    assert StoreProfile.model_validate(ceph) == named_profile("ceph")
    assert named_profile("aws").model_dump()["if_match_form"] == "as-returned"


def test_a_declared_profile_holds_on_every_path_that_builds_a_store() -> None:
    """``StoreConfig.profile`` (the command line's ``--store-profile``) and a
    Committer's ``profile`` make the store behave as that family: steps with no
    job record to go by (an abort over an unreadable one, a listing of uploads)
    send If-Match as it needs."""
    config = StoreConfig(endpoint_url="http://127.0.0.1:9", profile="ceph")
    store = S3Store.connect(config)
    assert store.profile == named_profile("ceph")
    assert S3Store.connect(replace(config, profile="auto")).profile is None
    assert Committer("s3://bkt/t", config).store.profile == named_profile("ceph")
    made_elsewhere = S3Store(store.client)  # an Airflow connection's client, say
    assert made_elsewhere.profile is None
    committer = Committer("s3://bkt/t", store=made_elsewhere, profile="minio")
    assert committer.store.profile == named_profile("minio")
    assert declared_profile("auto") is None and declared_profile("Ceph") == named_profile("ceph")
