"""The IAM policies of docs/deployment.md against the S3 requests the code sends.

A job (with a stray attempt, an abort, the cleanups, the output check, and a
Delta table's commits and expiry), the Commits page's reads and a sweep run
through the counting proxy (tests/s3proxy.py), which names each request as
botocore does; each name maps to the IAM action that allows it. Each role's
policy must allow what its requests need, and nothing else but the few actions
of error paths named here (and in the docs)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.helpers import pending, write_task
from tests.s3proxy import S3Proxy, s3_operations
from tests.table_jobs import table_job
from tests.whole_job import run_job
from zero_rename.airflow.ui.view import destination_view
from zero_rename.core.committer import Committer

pytestmark = pytest.mark.s3

DOCS = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"

# The IAM action that allows each S3 request (AWS's "Actions, resources, and
# condition keys for Amazon S3"): a HEAD is allowed as its GET is.
IAM_ACTIONS = {
    "HeadBucket": "s3:ListBucket",
    "ListObjectsV2": "s3:ListBucket",
    "ListObjects": "s3:ListBucket",
    "ListMultipartUploads": "s3:ListBucketMultipartUploads",
    "GetObject": "s3:GetObject",
    "HeadObject": "s3:GetObject",
    "PutObject": "s3:PutObject",
    "CreateMultipartUpload": "s3:PutObject",
    "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject",
    "AbortMultipartUpload": "s3:AbortMultipartUpload",
    "ListParts": "s3:ListMultipartUploadParts",
    "DeleteObject": "s3:DeleteObject",
    "DeleteObjects": "s3:DeleteObject",
}
# Allowed beyond what the run below sends, for an error path: a part upload or a
# complete answered with a 500 asks whether the upload is still there.
ERROR_PATHS = {"job": {"s3:ListMultipartUploadParts"}, "page": set(), "sweep": set()}


def policies() -> dict[str, dict[str, set[str]]]:
    """Each role's policy in the docs: resource -> the actions it allows."""
    found: dict[str, dict[str, set[str]]] = {}
    for block in re.findall(r"```json\n(.*?)```", DOCS.read_text(), re.DOTALL):
        policy = json.loads(block)
        role = policy.get("Id", "").removeprefix("zero-rename-")
        for statement in policy["Statement"]:
            assert statement["Effect"] == "Allow" and "Condition" not in statement, role
            actions = found.setdefault(role, {}).setdefault(statement["Resource"], set())
            actions.update(statement["Action"])
    return found


def needed(proxy: S3Proxy) -> set[str]:
    """The IAM actions of the requests the proxy saw since its counts were reset."""
    ops = set(proxy.counts)
    assert ops <= set(IAM_ACTIONS), f"no IAM action mapped for {ops - set(IAM_ACTIONS)}"
    return {IAM_ACTIONS[op] for op in ops}


def test_the_mapping_names_s3_operations() -> None:
    assert set(IAM_ACTIONS) <= s3_operations()


def test_each_roles_policy_allows_what_its_requests_need_and_no_more(
    cli: Cli, proxy: S3Proxy, proxied: Committer, bucket: str
) -> None:
    """Bucket-level actions on the bucket, object actions under the tables' prefix."""
    documented = policies()
    assert set(documented) == {"job", "page", "sweep"}
    bucket_arn, objects_arn = "arn:aws:s3:::BUCKET", "arn:aws:s3:::BUCKET/PREFIX/*"
    bucket_level = {"s3:ListBucket", "s3:ListBucketMultipartUploads"}
    for role, statements in documented.items():
        assert set(statements) == {bucket_arn, objects_arn}, role
        assert statements[bucket_arn] == bucket_level, role
        assert not statements[objects_arn] & bucket_level, role

    c = proxied
    used: dict[str, set[str]] = {}
    proxy.reset_counts()
    job_id = run_job(c, losing_attempt=True)  # setup's probe, a stray the cleanup aborts
    c.validate_output(job_id)
    aborted = c.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(c, aborted, "00000", {"2024-01-05": b"x"})
    c.abort_job(aborted.job_id, reason="a step failed")
    c.cleanup_job(aborted.job_id)
    delta = Committer(f"s3://{bucket}/delta", c.store.config)
    table_job(delta, {"2024-01-01": [1]}, table_format="delta")
    table_job(delta, {"2024-01-01": [2]}, "replace", table_format="delta")
    expire = cli("--endpoint-url", proxy.endpoint_url, "table", "expire", delta.dest.url,
                 "--older-than", "0s")  # fmt: skip
    assert expire.code == 0 and "1 file(s)" in expire.out, expire.err
    used["job"] = needed(proxy)

    left = c.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    write_task(c, left, "00000", {"2024-01-07": b"y"})  # a job left in setup
    proxy.reset_counts()
    view = destination_view(c, 25)
    assert view.error == "" and len(view.jobs) == 3
    used["page"] = needed(proxy)

    proxy.reset_counts()
    sweep = cli("--endpoint-url", proxy.endpoint_url, "uploads", "abort", c.dest.url,
                "--all-older-than", "0s")  # fmt: skip
    assert sweep.code == 0, sweep.err
    assert c.job(left.job_id).state == "aborted" and pending(c) == []
    used["sweep"] = needed(proxy)

    for role, statements in documented.items():
        allowed = statements[bucket_arn] | statements[objects_arn]
        assert used[role] <= allowed, f"{role} needs {used[role] - allowed}"
        assert allowed - used[role] == ERROR_PATHS[role], f"{role} allows more than it needs"
