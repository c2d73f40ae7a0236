"""``lifecycle set|show`` against the embedded S3 server, which keeps lifecycle rules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.cli.conftest import Cli
from zero_rename.cli import context, lifecycle
from zero_rename.cli.exits import ExitCode
from zero_rename.core.s3.client import S3Store, StoreConfig

pytestmark = pytest.mark.s3

EXISTING = [
    {
        "ID": "logs-expire",
        "Status": "Enabled",
        "Filter": {"Prefix": "logs/"},
        "Expiration": {"Days": 30},
    },
    {
        "ID": "tmp-abort",
        "Status": "Enabled",
        "Filter": {"Prefix": "tmp/"},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
    },
]


def _rules(client: Any, bucket: str) -> list[dict[str, Any]]:
    return lifecycle.read_rules(S3Store(client), bucket)


def test_set_merges_into_existing_rules_and_updates_in_place(
    cli: Cli, bucket: str, store_config: StoreConfig
) -> None:
    client = S3Store.connect(store_config).client
    client.put_bucket_lifecycle_configuration(
        Bucket=bucket,
        LifecycleConfiguration={"Rules": EXISTING},
        TransitionDefaultMinimumObjectSize="varies_by_storage_class",
    )
    ran = cli("lifecycle", "set", bucket, "--days", "1", "--prefix", "warehouse", "--json")
    assert ran.code == 0, ran.err
    assert ran.json()["change"] == "added" and ran.json()["rules"] == 3
    rules = _rules(client, bucket)
    assert [r["ID"] for r in rules] == ["logs-expire", "tmp-abort", lifecycle.RULE_ID]
    assert {r["ID"]: r for r in rules}["logs-expire"]["Expiration"] == {"Days": 30}
    # the configuration's own setting is written back, not reset to the default
    assert lifecycle.read_config(S3Store(client), bucket)[1] == {
        "TransitionDefaultMinimumObjectSize": "varies_by_storage_class"
    }
    ours = rules[-1]
    assert ours["Filter"] == {"Prefix": "warehouse/"}
    assert ours["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}

    again = cli("lifecycle", "set", f"s3://{bucket}", "--days", "1", "--prefix", "warehouse/")
    assert again.code == 0 and "unchanged" in again.out
    updated = cli("lifecycle", "set", bucket, "--days", "3", "--json")
    assert updated.json()["change"] == "updated"
    assert updated.json()["overlapping"] == ["tmp-abort"]
    rules = _rules(client, bucket)
    assert len(rules) == 3 and rules[-1]["AbortIncompleteMultipartUpload"] == {
        "DaysAfterInitiation": 3
    }


def test_show(cli: Cli, bucket: str) -> None:
    empty = cli("lifecycle", "show", bucket, "--json")
    assert empty.code == 0
    assert empty.json()["rules"] == [] and empty.json()["zero_rename_rule"] is None
    assert "no rule aborts abandoned uploads" in cli("lifecycle", "show", bucket).out
    cli("lifecycle", "set", bucket, "--days", "1")
    data = cli("lifecycle", "show", bucket, "--json").json()
    assert data["zero_rename_rule"]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    assert data["aborting_incomplete_uploads"] == [lifecycle.RULE_ID]
    text = cli("lifecycle", "show", bucket).out
    assert lifecycle.RULE_ID in text and "abort incomplete uploads after 1 d" in text


def test_missing_bucket_and_bad_input(cli: Cli, bucket: str) -> None:
    assert cli("lifecycle", "show", "no-such-bucket-here").code == ExitCode.NOT_FOUND
    assert cli("lifecycle", "set", f"s3://{bucket}/path", "--days", "1").code == ExitCode.USAGE
    assert (
        cli("lifecycle", "set", bucket, "--days", "1", "--prefix", "s3://x/y").code
        == ExitCode.USAGE
    )


@pytest.fixture
def lifecycle_refused(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A server without lifecycle support: PutBucketLifecycleConfiguration answers 501."""

    def refuse(**_: Any) -> None:
        raise ClientError(
            {
                "Error": {
                    "Code": "NotImplemented",
                    "Message": "A header you provided implies functionality "
                    "that is not implemented",
                },
                "ResponseMetadata": {"HTTPStatusCode": 501},
            },
            "PutBucketLifecycleConfiguration",
        )

    clients: list[Any] = []
    shared = context.connect

    def connect(config: StoreConfig) -> S3Store:
        store = shared(config)
        store.client.meta.events.register(
            "before-call.s3.PutBucketLifecycleConfiguration", refuse, unique_id="refuse-lifecycle"
        )
        clients.append(store.client)
        return store

    monkeypatch.setattr(context, "connect", connect)
    yield
    for client in clients:
        client.meta.events.unregister(
            "before-call.s3.PutBucketLifecycleConfiguration", unique_id="refuse-lifecycle"
        )


@pytest.mark.usefixtures("lifecycle_refused")
def test_a_server_refusing_lifecycle_rules_says_so_and_names_the_alternative(
    cli: Cli, bucket: str
) -> None:
    ran = cli("lifecycle", "set", bucket, "--days", "1")
    assert ran.code == ExitCode.STORE
    assert "refused the lifecycle configuration" in ran.err and "NotImplemented" in ran.err
    assert "uploads abort DEST --all-older-than" in ran.err
    assert len(ran.err.strip().splitlines()) == 1
