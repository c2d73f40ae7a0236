"""Packaging and the hook: provider metadata, plugin registration, the S3 client's shape."""

from __future__ import annotations

import json
import logging
import warnings
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.helpers import CREDENTIAL_URLS, leaks
from zero_rename.core.s3.client import StoreConfig
from zero_rename.core.s3.profiles import named_profile
from zero_rename.embedded_s3 import EmbeddedS3
from zero_rename.errors import ConfigError

pytestmark = pytest.mark.airflow


def test_provider_entry_point_names_the_distribution() -> None:
    (ep,) = [
        e
        for e in entry_points(group="apache_airflow_provider")
        if e.value.startswith("zero_rename.")
    ]
    info = ep.load()()
    assert info["package-name"] == "zero-rename"
    # Every class path it names imports.
    for path in info["extra-links"]:
        module, _, name = path.rpartition(".")
        assert getattr(__import__(module, fromlist=[name]), name)


def test_airflow_loads_the_provider_and_the_plugin() -> None:
    from airflow import plugins_manager
    from airflow.providers_manager import ProvidersManager

    assert "zero-rename" in ProvidersManager().providers
    (plugin,) = [p for p in plugins_manager.get_plugin_info() if p["name"] == "zero_rename"]
    assert "/zero-rename" in str(plugin["fastapi_apps"])
    assert "Commits" in str(plugin["external_views"])


def test_the_provider_info_validates_against_airflows_schemas() -> None:
    """The runtime schema Airflow checks provider info with, and the finer one of a
    provider's own declaration (``conn-fields``, ``ui-field-behaviour``), both shipped
    with Airflow."""
    import airflow
    import jsonschema

    from zero_rename.airflow.get_provider_info import get_provider_info

    schemas = Path(airflow.__file__).parent
    info = get_provider_info()
    jsonschema.validate(info, json.loads((schemas / "provider_info.schema.json").read_text()))
    declared = json.loads((schemas / "provider.yaml.schema.json").read_text())
    jsonschema.validate(info["connection-types"], declared["properties"]["connection-types"])


def test_airflow_draws_the_connection_form_from_the_provider_info() -> None:
    """What the api-server's connection form endpoint (``GET /ui/connections/hook_meta``)
    answers, from its own handler: the form comes from the provider info alone."""
    from airflow.api_fastapi.core_api.routes.ui.connections import hook_meta_data

    (form,) = [f for f in hook_meta_data() if f.connection_type == "zero_rename"]
    assert form.hook_class_name == "zero_rename.airflow.hooks.ZeroRenameHook"
    assert form.hook_name == "zero-rename (S3-compatible store)"
    standard = form.standard_fields
    assert standard is not None and standard.host is not None and standard.host.hidden
    assert standard.login is not None and standard.login.title == "Access key ID"
    assert standard.password is not None and standard.password.title == "Secret access key"
    extra = form.extra_fields or {}
    assert set(extra) == {"endpoint_url", "region_name", "store_profile"}
    profile = extra["store_profile"]["schema"]
    assert profile["enum"][0] == profile["default"] == "auto" and "minio" in profile["enum"]
    assert extra["endpoint_url"]["schema"]["title"] == "S3 endpoint URL"


def test_a_connection_the_form_saved_serves_the_hook(
    s3_server: EmbeddedS3, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The form's fields are the extra's keys the hook reads; the amazon provider's
    wrapper says nothing of the connection's own type."""
    from zero_rename.airflow.hooks import ZeroRenameHook

    saved = {
        "conn_type": "zero_rename",
        "login": s3_server.access_key,
        "password": s3_server.secret_key,
        "extra": {
            "endpoint_url": s3_server.endpoint_url,
            "region_name": "us-east-1",
            "store_profile": "seaweedfs",
        },
    }
    monkeypatch.setenv("AIRFLOW_CONN_ZR_FORM", json.dumps(saved))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hook = ZeroRenameHook(aws_conn_id="zr_form")
        store = hook.store()
    assert store.profile == named_profile("seaweedfs")
    assert hook.conn_config.region_name == "us-east-1"
    store.check_bucket(bucket)


@pytest.fixture
def conn(s3_server: EmbeddedS3, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(
        "AIRFLOW_CONN_ZR_TEST",
        json.dumps(
            {
                "conn_type": "aws",
                "login": s3_server.access_key,
                "password": s3_server.secret_key,
                "extra": {
                    "endpoint_url": s3_server.endpoint_url,
                    "config_kwargs": {
                        "connect_timeout": 3,
                        "s3": {"payload_signing_enabled": True},
                    },
                },
            }
        ),
    )
    return "zr_test"


def test_hook_sizes_the_pool_and_keeps_the_connection_settings(conn: str, bucket: str) -> None:
    from zero_rename.airflow.hooks import ZeroRenameHook

    hook = ZeroRenameHook(aws_conn_id=conn, pool_size=96)
    client = hook.get_conn()
    config = client.meta.config
    assert config.max_pool_connections == 96
    # The core's retries: max_attempts counts every attempt, the first included.
    assert config.retries == {"mode": "standard", "total_max_attempts": StoreConfig().max_attempts}
    assert config.read_timeout == StoreConfig().read_timeout
    # The connection's endpoint, its own config_kwargs, and path style for a custom endpoint.
    assert client.meta.endpoint_url == hook.endpoint_url
    assert config.s3 == {"payload_signing_enabled": True, "addressing_style": "path"}
    store = hook.store()
    assert store.pool_size == 96
    store.check_bucket(bucket)  # credentials from the connection, not the environment


def test_hook_store_behaves_as_the_connections_store_profile(
    s3_server: EmbeddedS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zero_rename.airflow.hooks import ZeroRenameHook

    extra = {"endpoint_url": s3_server.endpoint_url, "store_profile": "ceph"}
    monkeypatch.setenv("AIRFLOW_CONN_ZR_CEPH", json.dumps({"conn_type": "aws", "extra": extra}))
    hook = ZeroRenameHook(aws_conn_id="zr_ceph")
    assert hook.store().profile == named_profile("ceph")
    assert hook.committer("s3://bkt/t").store.profile == named_profile("ceph")


def test_hook_committer_runs_a_step(conn: str, dest: str) -> None:
    from zero_rename.airflow.hooks import ZeroRenameHook

    committer = ZeroRenameHook(aws_conn_id=conn).committer(dest)
    job = committer.setup_job({"conflict_mode": "append"})
    assert committer.job(job.job_id).state == "setup"


@pytest.mark.parametrize("url", CREDENTIAL_URLS)
def test_an_endpoint_with_a_credential_in_the_connection_is_refused_unechoed(
    url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The extra's ``endpoint_url`` is checked before a client is built from it
    (botocore would quote it in its errors, Spark's command line would carry it)."""
    from zero_rename.airflow.hooks import ZeroRenameHook

    monkeypatch.setenv(
        "AIRFLOW_CONN_ZR_LEAKY",
        json.dumps({"conn_type": "aws", "extra": {"endpoint_url": url}}),
    )
    caplog.set_level(logging.DEBUG)
    hook = ZeroRenameHook(aws_conn_id="zr_leaky")
    for step in (lambda: hook.committer("s3://bkt/t"), lambda: hook.endpoint_url):
        with pytest.raises(ConfigError) as err:
            step()
        assert "zr_leaky" in str(err.value) and "***@" in str(err.value)
        assert not leaks(str(err.value))
    assert not leaks(caplog.text)


def test_a_failed_submit_is_told_by_the_applications_own_error() -> None:
    """The hook's message starts with the command line; the stage's error, for the job
    record, is the exit code and the last line of the output that says what failed."""
    from zero_rename.airflow.spark import submit_failure

    hook_message = (
        "Cannot execute: spark-submit --master local[2] app.py --option endpoint=http://s3 "
        "--date 2024-02-01. Error code is: 2.\nLast spark-submit output:\n"
        "2026-01-01 INFO daily_partitioned_write: starting\n"
        "2026-01-01 ERROR daily_partitioned_write: option compression: 'no-such-codec' is "
        "not one of none, snappy, gzip, zstd\n"
        "26/01/01 INFO ShutdownHookManager: Shutdown hook called"
    )
    assert submit_failure(hook_message) == (
        "spark-submit exited with code 2: 2026-01-01 ERROR daily_partitioned_write: option "
        "compression: 'no-such-codec' is not one of none, snappy, gzip, zstd"
    )
    assert submit_failure("Cannot execute: spark-submit x. Error code is: 1.") == (
        "spark-submit exited with code 1"
    )


def test_the_lineage_key_reaches_spark_as_its_java_client_takes_it() -> None:
    """Airflow's provider passes an http transport's key as its Python client's header
    value; OpenLineage's Java client adds "Bearer " itself, so the stage takes it off
    (the whole path, with Spark's listener: tests/airflow/test_spark_lineage.py; the
    key masked in the task's log: tests/deploy/test_plain_stack.py)."""
    from zero_rename.airflow.spark import lineage_key_unprefixed, lineage_secrets

    injected = {
        "spark.openlineage.transport.type": "http",
        "spark.openlineage.transport.auth.type": "api_key",
        "spark.openlineage.transport.auth.apiKey": "Bearer k-1",
        "spark.openlineage.transport.transports.marquez.auth.apiKey": "Bearer k-2",
        "spark.openlineage.transport.transports.other.auth.apiKey": "k-3",
        "spark.openlineage.parentJobName": "Bearer not-a-key",
        "spark.executor.memory": "2g",
    }
    assert lineage_key_unprefixed(injected) == {
        **injected,
        "spark.openlineage.transport.auth.apiKey": "k-1",
        "spark.openlineage.transport.transports.marquez.auth.apiKey": "k-2",
    }
    # What the task log must not show (the provider's hook masks only settings
    # named for a secret or a password): the keys, and headers, which may carry one.
    headers = {
        "spark.openlineage.transport.headers.X-Api-Key": "h-4",
        "spark.openlineage.transport.headers.X-Empty": None,  # no "None" masked everywhere
    }
    assert lineage_secrets({**injected, **headers}) == ["Bearer k-1", "Bearer k-2", "k-3", "h-4"]
