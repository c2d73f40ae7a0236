"""delta-rs's storage options for the job's store, from the store's own client.

delta-rs sends its requests with its own object store (Rust's
``object_store``), not botocore, so it is told where and as whom: the
endpoint, region and addressing the store's client uses, and the credentials
that client resolved (environment, profile, role, or an Airflow
connection's). The options live in memory for the calls they are handed to:
never logged, never in a record or an error.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from zero_rename.core.s3.client import S3Store
from zero_rename.core.tables.common import frozen_credentials


def storage_options(store: S3Store, bucket: str) -> dict[str, str]:
    """delta-rs storage options that reach ``bucket`` as ``store`` does."""
    client = store.client
    options = {"AWS_REGION": client.meta.region_name or "us-east-1"}
    options.update(_endpoint(client, bucket))
    options.update(_credentials(client))
    options.update(_limits(client))
    return options


def _endpoint(client: Any, bucket: str) -> dict[str, str]:
    endpoint = str(client.meta.endpoint_url)
    parts = urlsplit(endpoint)
    style = (client.meta.config.s3 or {}).get("addressing_style") or "auto"
    options = {"AWS_ALLOW_HTTP": "true"} if parts.scheme == "http" else {}
    if (parts.hostname or "").endswith(".amazonaws.com"):
        # AWS itself: object_store builds the regional endpoint from the region.
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false" if style == "path" else "true"
    elif style == "virtual":
        # object_store takes a virtual-hosted endpoint as the bucket's own host.
        options["AWS_ENDPOINT_URL"] = f"{parts.scheme}://{bucket}.{parts.netloc}"
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "true"
    else:
        options["AWS_ENDPOINT_URL"] = endpoint
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    return options


def _credentials(client: Any) -> dict[str, str]:
    """The store's signing credentials as delta-rs takes them."""
    frozen = frozen_credentials(client)
    if frozen is None:
        return {"AWS_SKIP_SIGNATURE": "true"}
    options = {"AWS_ACCESS_KEY_ID": frozen.access_key, "AWS_SECRET_ACCESS_KEY": frozen.secret_key}
    if frozen.token:
        options["AWS_SESSION_TOKEN"] = frozen.token
    return options


def _limits(client: Any) -> dict[str, str]:
    """Timeouts and retries as the store's client has them: without them delta-rs
    retries a store that is down for three minutes."""
    config = client.meta.config
    retries = config.retries or {}
    # botocore counts either every attempt or the retries alone.
    attempts = retries.get("total_max_attempts") or retries.get("max_attempts", 2) + 1
    return {
        "connect_timeout": f"{max(1, int(config.connect_timeout or 10))}s",
        "timeout": f"{max(1, int(config.read_timeout or 60))}s",
        "max_retries": str(max(0, int(attempts) - 1)),
    }
