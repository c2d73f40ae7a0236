"""delta-rs's storage options, taken from the store's own botocore client."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config

from zero_rename.core.s3.client import S3Store, StoreConfig, make_client
from zero_rename.core.tables.delta_log import one_line
from zero_rename.core.tables.delta_storage import storage_options


@pytest.fixture(autouse=True)
def _no_environment_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's S3 server may have put its endpoint in the environment,
    where boto3 would take it for AWS's."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)


def client(endpoint: str | None, style: str = "path", token: str | None = None) -> Any:
    session = boto3.session.Session(
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="wJalrXUtnFEMI/K7MDENG",
        aws_session_token=token,
        region_name="eu-west-1",
    )
    return session.client(
        "s3", endpoint_url=endpoint, config=Config(s3={"addressing_style": style})
    )


def test_a_local_store_over_http() -> None:
    options = storage_options(S3Store(client("http://127.0.0.1:8333")), "b")
    assert options["AWS_ENDPOINT_URL"] == "http://127.0.0.1:8333"
    assert options["AWS_ALLOW_HTTP"] == "true"
    assert options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "false"
    assert options["AWS_REGION"] == "eu-west-1"
    assert options["AWS_ACCESS_KEY_ID"] == "AKIDEXAMPLE"
    assert options["AWS_SECRET_ACCESS_KEY"] == "wJalrXUtnFEMI/K7MDENG"
    assert "AWS_SESSION_TOKEN" not in options


def test_aws_and_a_session_token() -> None:
    options = storage_options(S3Store(client(None, "virtual", token="FwoGZX")), "b")
    assert "AWS_ENDPOINT_URL" not in options and "AWS_ALLOW_HTTP" not in options
    assert options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "true"
    assert options["AWS_SESSION_TOKEN"] == "FwoGZX"


def test_a_virtual_hosted_store_names_the_bucket_host() -> None:
    options = storage_options(S3Store(client("https://s3.example.com:9000", "virtual")), "b")
    assert options["AWS_ENDPOINT_URL"] == "https://b.s3.example.com:9000"
    assert options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "true"


def test_timeouts_and_retries_follow_the_store_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    config = StoreConfig(
        endpoint_url="http://127.0.0.1:1", max_attempts=2, connect_timeout=3, read_timeout=40
    )
    options = storage_options(S3Store(make_client(config), config=config), "b")
    assert (options["max_retries"], options["connect_timeout"], options["timeout"]) == (
        "1",
        "3s",
        "40s",
    )


def test_errors_become_one_line() -> None:
    text = (
        "Generic S3 error\n   \x1b[31m\u21b3\x1b[0m Error performing GET http://h/b/k\n"
        '   \x1b[31m\u21b3\x1b[0m <?xml version="1.0"?><Error/>\n'
        "   \x1b[31m\u21b3\x1b[0m Connection refused (os error 111)\n"
    )
    assert one_line(OSError(text)) == "Generic S3 error ... Connection refused (os error 111)"
