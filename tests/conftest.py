"""Shared fixtures: one real S3 server (SeaweedFS) per test session, a fresh bucket per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tests.s3proxy import S3Proxy, proxy_for
from zero_rename.core.committer import Committer
from zero_rename.core.store import StoreConfig
from zero_rename.embedded_s3 import EmbeddedS3

_MARKERS = {"unit", "s3", "spark", "airflow", "browser"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that name no marker are unit tests, so `-m unit` selects them."""
    for item in items:
        if not _MARKERS & {m.name for m in item.iter_markers()}:
            item.add_marker(pytest.mark.unit)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[EmbeddedS3]:
    """The embedded SeaweedFS; its credentials go into the environment so that
    boto3's standard chain, pyarrow and Spark executors all find them."""
    with EmbeddedS3() as server:
        saved = {k: os.environ.get(k) for k in server.environment()}
        os.environ.update(server.environment())
        yield server
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def store_config(s3_server: EmbeddedS3) -> StoreConfig:
    return StoreConfig(endpoint_url=s3_server.endpoint_url, max_pool_connections=64)


@pytest.fixture
def bucket(s3_server: EmbeddedS3) -> str:
    name = f"t-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(name)
    return name


@pytest.fixture
def dest(bucket: str) -> str:
    return f"s3://{bucket}/table"


@pytest.fixture
def committer(dest: str, store_config: StoreConfig) -> Committer:
    return Committer(dest, store_config)


@pytest.fixture
def proxy(s3_server: EmbeddedS3) -> Iterator[S3Proxy]:
    """A fault-injecting proxy in front of the S3 server, for this test alone."""
    with proxy_for(s3_server) as running:
        yield running


@pytest.fixture
def proxied(proxy: S3Proxy, dest: str) -> Committer:
    """A committer whose every request goes through ``proxy``."""
    return Committer(dest, StoreConfig(endpoint_url=proxy.endpoint_url, max_pool_connections=64))
