"""The light client of the driver-side steps: the same answers as botocore's client,
a whole job through it, and a fresh process that never loads botocore's client."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.s3proxy import S3Proxy
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import S3Store, StoreConfig
from zero_rename.core.s3.light import LightClient, light_client_unsupported
from zero_rename.errors import PreconditionFailed


@pytest.mark.unit
def test_the_light_client_steps_aside_where_botocore_would_send_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]
) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path) + "/none")
    endpoint = StoreConfig(endpoint_url="http://127.0.0.1:8333")
    assert light_client_unsupported(endpoint) is None
    assert "request_path" in str(
        light_client_unsupported(StoreConfig(endpoint_url="http://h:1", request_path="botocore"))
    )
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    assert "AWS" in str(light_client_unsupported(StoreConfig()))
    assert "virtual" in str(
        light_client_unsupported(StoreConfig(endpoint_url="http://h:1", path_style=False))
    )
    monkeypatch.setenv("AWS_USE_FIPS_ENDPOINT", "true")
    assert "FIPS" in str(light_client_unsupported(endpoint))
    monkeypatch.delenv("AWS_USE_FIPS_ENDPOINT")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert "proxy" in str(light_client_unsupported(endpoint))
    monkeypatch.delenv("HTTP_PROXY")
    (config := tmp_path / "config").write_text("[default]\nregion = eu-west-1\n")  # type: ignore[operator]
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    assert "config file" in str(light_client_unsupported(endpoint))


@pytest.mark.s3
def test_the_light_client_answers_as_botocore_does(proxy: S3Proxy, bucket: str) -> None:
    config = StoreConfig(endpoint_url=proxy.endpoint_url)
    light, full = S3Store.connect(config, light=True), S3Store.connect(config)
    assert isinstance(light.client, LightClient) and not isinstance(full.client, LightClient)
    etag = light.put_object(bucket, "d/a b+c%/x.json", b"{}", if_none_match=True)
    with pytest.raises(PreconditionFailed):
        light.put_object(bucket, "d/a b+c%/x.json", b"[]", if_none_match=True)
    with pytest.raises(PreconditionFailed):
        light.put_object(bucket, "d/a b+c%/x.json", b"[]", if_match='"0"')
    light.put_object(bucket, "d/a b+c%/x.json", b"[1]", if_match=etag)
    assert light.get_object(bucket, "d/a b+c%/x.json") == full.get_object(bucket, "d/a b+c%/x.json")
    assert light.get_object(bucket, "d/a b+c%/x.json", first_bytes=2) == (
        b"[1",
        full.head_object(bucket, "d/a b+c%/x.json").etag,  # type: ignore[union-attr]
    )
    assert light.get_object(bucket, "d/missing") is None
    assert light.head_object(bucket, "d/missing") is None
    head, full_head = (
        light.head_object(bucket, "d/a b+c%/x.json"),
        full.head_object(bucket, "d/a b+c%/x.json"),
    )
    assert head is not None and full_head is not None
    assert (head.key, head.size, head.etag) == (full_head.key, full_head.size, full_head.etag)
    upload = light.create_upload(bucket, "d/up")
    part = light.upload_part(bucket, "d/up", upload, 1, b"part")
    assert [(p.number, p.etag) for p in light.list_parts(bucket, "d/up", upload)] == [(1, part)]
    assert [u.upload_id for u in light.list_uploads(bucket, "d/")] == [upload]
    assert light.complete_upload(bucket, "d/up", upload, [(1, part)])
    keys = sorted(o.key for o in light.list_objects(bucket, "d/", page_size=1))
    assert keys == sorted(o.key for o in full.list_objects(bucket, "d/"))
    assert light.delete_objects(bucket, keys) == 2
    assert not list(light.list_objects(bucket, "d/"))
    light.check_bucket(bucket)
    assert light.server == full.server


_DRIVER = """
import sys
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import S3Store, StoreConfig
config = StoreConfig(endpoint_url=sys.argv[2])
committer = Committer(sys.argv[1], config, S3Store.connect(config, light=True))
job = committer.setup_job({"partition_columns": "dt"})
attempt = committer.task_attempt(job, "00000")
with attempt.open({"dt": "2026-11-28"}) as out:
    out.write(b"rows")
attempt.commit()
committer.commit_job(job.job_id)
loaded = sorted(m for m in sys.modules if m in ("botocore.client", "botocore.session", "boto3"))
print(",".join(loaded))
"""


@pytest.mark.s3
def test_a_job_on_the_light_client_loads_no_botocore_client(proxy: S3Proxy, dest: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    env["AWS_CONFIG_FILE"] = os.devnull + "-none"
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, dest, proxy.endpoint_url],
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == ""
    committer = Committer(dest, StoreConfig(endpoint_url=proxy.endpoint_url))
    files = committer.snapshot().files
    assert files and all(f.relative.startswith("dt=2026-11-28/") for f in files)
    assert not list(committer.store.list_uploads(committer.dest.bucket, committer.dest.dir))
