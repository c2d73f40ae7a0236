"""The light client (every store's where it sends as botocore would): the same
answers and signatures as botocore's client.
(A whole job through it, in fresh processes that never load botocore's client:
tests/spark/test_driver_imports.py.)"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.s3proxy import S3Proxy
from zero_rename.core.s3.client import S3Store, StoreConfig
from zero_rename.core.s3.light import LightClient, light_client_unsupported
from zero_rename.core.s3.sigv4 import Signer, StaticCredentials, signed_host
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
    assert "path" in str(light_client_unsupported(StoreConfig(endpoint_url="http://h:1/s3")))
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
    light, full = S3Store.connect(config), S3Store.connect(config, light=False)
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
    # Keys listed URL-encoded, as botocore asks: XML 1.0 cannot carry a control
    # character (nor can a DeleteObjects body: that key stays, under e/).
    light.put_object(bucket, "d/dt=red+%\u202e x", b"")
    light.put_object(bucket, "e/dt=\x1b[31m", b"")
    for prefix in ("d/", "e/"):
        keys = sorted(o.key for o in light.list_objects(bucket, prefix, page_size=1))
        assert keys == sorted(o.key for o in full.list_objects(bucket, prefix))
    assert [o.key for o in light.list_objects(bucket, "e/")] == ["e/dt=\x1b[31m"]
    keys = [o.key for o in light.list_objects(bucket, "d/")]
    assert "d/dt=red+%\u202e x" in keys
    assert light.delete_objects(bucket, keys) == 3
    assert not list(light.list_objects(bucket, "d/"))
    light.check_bucket(bucket)
    assert light.server == full.server
    # A call it does not make itself goes to botocore's client, made then, whose
    # events reach a hook on the light client's.
    assert light.client._fallback is None
    seen: list[str] = []
    light.client.meta.events.register(
        "before-call.s3", lambda event_name, **_: seen.append(event_name)
    )
    assert light.get_lifecycle(bucket) == full.get_lifecycle(bucket)
    assert light.client._fallback is not None
    assert seen == ["before-call.s3.GetBucketLifecycleConfiguration"]


@pytest.mark.unit
def test_requests_are_signed_as_botocore_signs_them() -> None:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    requests = [
        (
            "PUT",
            "/b/d%20x/a.json",
            {"If-None-Match": "*", "Content-Type": "application/json"},
            b"{}",
        ),
        ("POST", "/b/k?uploads", {}, b""),
        ("GET", "/b?list-type=2&prefix=a%2Fb&max-keys=1000&encoding-type=url", {}, b""),
        (
            "POST",
            "/b?delete",
            {"Content-MD5": "1B2M2Y8AsgTpgAmY7PhCfg==", "Content-Type": "x"},
            b"<",
        ),
        ("GET", "/b/k?uploadId=x%2By&part-number-marker=0", {"Range": "bytes=0-1  "}, b""),
    ]
    origins = [
        "http://127.0.0.1:8333",
        "https://s3.example.com",
        "https://[::1]:9000",
        "http://h:80",
    ]
    for origin in origins:
        for token in (None, "session-token"):
            for method, path, headers, body in requests:
                theirs = AWSRequest(method, origin + path, data=body, headers=dict(headers))
                S3SigV4Auth(Credentials("AKID", "SECRET", token), "s3", "eu-west-1").add_auth(
                    theirs
                )
                when = datetime.strptime(theirs.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
                ours = Signer(signed_host(origin), "eu-west-1").headers(
                    StaticCredentials("AKID", "SECRET", token),
                    method,
                    path,
                    headers,
                    body,
                    now=when.replace(tzinfo=UTC).timestamp(),
                )
                assert ours["authorization"] == theirs.headers["Authorization"], (origin, path)
    assert "SECRET" not in repr(StaticCredentials("AKID", "SECRET"))


@pytest.mark.unit
def test_events_are_heard_as_botocores_emitter_has_them_heard() -> None:
    from botocore.hooks import HierarchicalEmitter

    from zero_rename.core.s3.events import Events

    for events in (Events(), HierarchicalEmitter()):
        heard: list[str] = []

        def hook(name: str, heard: list[str] = heard) -> Any:
            return lambda event_name, **_: heard.append(f"{name}:{event_name}")

        events.register("before-call.s3", hook("s3"), unique_id="s3")
        events.register("before-call.s3", hook("again"), unique_id="s3")  # once per id
        events.register("before-call.s3.PutObject", hook("put"))
        events.register_first("before-call.s3", hook("first"))
        events.register("before-call.*.GetObject", hook("any"))
        events.emit("before-call.s3.PutObject", params={})
        events.emit("before-call.s3.GetObject")
        events.unregister("before-call.s3", unique_id="s3")
        events.emit("before-call.s3.HeadObject")
        assert heard == [
            *("put:before-call.s3.PutObject", "first:before-call.s3.PutObject"),
            "s3:before-call.s3.PutObject",
            *("any:before-call.s3.GetObject", "first:before-call.s3.GetObject"),
            *("s3:before-call.s3.GetObject", "first:before-call.s3.HeadObject"),
        ], type(events).__name__
