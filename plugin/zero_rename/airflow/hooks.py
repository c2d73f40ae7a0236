"""The hook: an Airflow AWS connection turned into the core's S3 store.

Credentials, region, role and endpoint come from the connection (``aws_conn_id``;
a custom endpoint such as MinIO or SeaweedFS goes in its extra as
``endpoint_url``), exactly as for the amazon provider's ``S3Hook``. What this
hook adds is the client shape the commit protocol needs: a connection pool as
large as the commit's thread pool, standard retries and the long read timeout
that ``CompleteMultipartUpload`` may take.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from functools import cached_property
from typing import Any

from airflow.providers.amazon.aws.hooks.s3 import S3Hook
from airflow.providers.amazon.aws.utils.connection_wrapper import AwsConnectionWrapper
from botocore.config import Config

from zero_rename.airflow.get_provider_info import CONN_TYPE, HOOK_NAME
from zero_rename.core import (
    AUTO_PROFILE,
    Committer,
    JobOptions,
    S3Store,
    StoreConfig,
    check_endpoint,
    client_config,
    declared_profile,
)

DEFAULT_POOL_SIZE: int = JobOptions.model_fields["threads"].default


class ZeroRenameHook(S3Hook):
    """``S3Hook`` whose client is sized and retried for commit work.

    :param aws_conn_id: the AWS connection; ``endpoint_url`` in its extra selects
        an S3-compatible store.
    :param pool_size: HTTP connections in the client's pool; give at least the
        job's ``threads`` option, or commit threads queue for connections.
    :param store_config: the client's retries and timeouts (its pool is
        ``pool_size``); by default the core's, made for commit work.
    """

    # Its own connection type, for the connection form the provider info declares;
    # a connection of type ``aws`` serves as well.
    conn_type = CONN_TYPE
    hook_name = HOOK_NAME

    def __init__(
        self,
        aws_conn_id: str | None = S3Hook.default_conn_name,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        store_config: StoreConfig | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(aws_conn_id=aws_conn_id, **kwargs)
        self.pool_size = pool_size
        self.store_config = store_config or StoreConfig()

    @cached_property
    def conn_config(self) -> AwsConnectionWrapper:
        """The connection, as the amazon provider reads it. Its wrapper warns about a
        connection whose type is not ``aws``; this hook's own type is meant."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", f".*got '{self.conn_type}'", UserWarning)
            wrapped: AwsConnectionWrapper = super().conn_config
        return wrapped

    @property
    def endpoint_url(self) -> str | None:
        """The connection's S3 endpoint, or None for AWS itself. Not a secret: one
        carrying credentials (``http://KEY:SECRET@host``) is refused, unechoed,
        before any client quotes it in an error or a log.

        Raises:
            ConfigError: the extra's ``endpoint_url`` is not an http(s) URL or
                carries credentials.
        """
        url = self.conn_config.get_service_endpoint_url("s3")
        if not url:
            return None
        return check_endpoint(url, f"endpoint_url of connection {self.aws_conn_id!r}")

    @property
    def config(self) -> Config:
        """The connection's botocore settings (``config_kwargs``), with the pool,
        retries and timeouts the commit needs laid over them: the core's own
        (:func:`~zero_rename.core.s3.client.client_config`) of ``store_config``."""
        base = super().config
        s3 = dict(base.s3 or {})
        if self.endpoint_url:
            # Custom endpoints rarely resolve virtual-host bucket names; the
            # connection may still choose otherwise in config_kwargs.
            s3.setdefault("addressing_style", "path")
        shaped = replace(self.store_config, max_pool_connections=self.pool_size)
        return base.merge(client_config(shaped, s3))

    def store(self) -> S3Store:
        """The core's store over this hook's boto3 client (its endpoint checked first)."""
        _ = self.endpoint_url
        return S3Store(self.get_conn(), profile=declared_profile(self.store_profile))

    @property
    def store_profile(self) -> str:
        """The store's family from the connection's extra (``store_profile``), or
        ``auto``: probe it at job setup. Not a secret."""
        return str(self.conn_config.extra_config.get("store_profile") or AUTO_PROFILE)

    def committer(self, destination: str) -> Committer:
        return Committer(destination, store=self.store(), profile=self.store_profile)
