"""The Iceberg catalog a job publishes through, and the table's name in it.

A named catalog (``iceberg_catalog``) is configured the way PyIceberg users
configure one: ``.pyiceberg.yaml`` (in ``$PYICEBERG_HOME``, the home directory
or the working directory) or ``PYICEBERG_CATALOG__<NAME>__<KEY>`` variables, so
an existing Glue, REST, Hive or SQL catalog works unchanged. The configuration
is read afresh at every use (PyIceberg reads the variables once, at import).

Without a name, the embedded catalog: PyIceberg's SQL catalog on SQLite, in
``$ZERO_RENAME_ICEBERG_HOME/catalog.db`` (default ``~/.zero-rename/iceberg``),
catalog name ``zero_rename``, its warehouse the destination's bucket. It serves
one machine: a first run, the demo. Jobs committed from several machines need a
catalog they share.

Either way the catalog's FileIO reaches S3 as the job's store does: its
endpoint, region and credentials (resolved by botocore, as the store's client
signs with them) are added where the configuration has none of its own. They
are handed over in memory only, never logged or written anywhere.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.utils.config import Config

from zero_rename.core.data.layout import Destination
from zero_rename.core.s3.client import S3Store
from zero_rename.core.s3.redact import MASK, redact
from zero_rename.core.tables.common import frozen_credentials
from zero_rename.core.tables.iceberg_io import PY_IO_IMPL, SINGLE_REQUEST_IO, read_with
from zero_rename.errors import ConfigError

log = logging.getLogger(__name__)

HOME_VARIABLE = "ZERO_RENAME_ICEBERG_HOME"
EMBEDDED_CATALOG = "zero_rename"
CATALOG_FILE = "catalog.db"
# Configuration keys by which a user's catalog names its own S3 credentials (or
# a way to get them): where any is set, the store's are not added.
_CREDENTIAL_KEYS = (
    "s3.access-key-id",
    "client.access-key-id",
    "s3.profile-name",
    "client.profile-name",
    "s3.role-arn",
    "client.role-arn",
    "s3.anonymous",
    "s3.signer",
)
_SECRET_KEYS = ("s3.secret-access-key", "s3.session-token")
_NAME_CHARS = re.compile(r"[^a-z0-9]+")
_NAME_LIMIT = 128


def catalog_home() -> Path:
    """Where the embedded catalog's SQLite file lives."""
    configured = os.environ.get(HOME_VARIABLE, "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".zero-rename" / "iceberg"


def embedded_uri() -> str:
    return f"sqlite:///{catalog_home() / CATALOG_FILE}"


def derived_table_name(dest: Destination) -> str:
    """``namespace.table`` for a destination with no ``iceberg_table``: the bucket
    and the prefix, lower-cased, each run of other characters than ``a-z0-9``
    made one ``_`` (``s3://my-bucket/warehouse/events`` is
    ``my_bucket.warehouse_events``); a name starting with a digit gets ``n_``
    (namespace) or ``t_`` (table) before it, and one longer than 128 characters
    is cut to 119 and ends in ``_`` and 8 hex digits of the SHA-256 of the original."""
    return f"{_sql_name(dest.bucket, 'n_')}.{_sql_name(dest.prefix, 't_')}"


def _sql_name(text: str, lead: str) -> str:
    name = _NAME_CHARS.sub("_", text.lower()).strip("_") or "x"
    if name[0].isdigit():
        name = lead + name
    if len(name) > _NAME_LIMIT:
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        name = f"{name[: _NAME_LIMIT - 9]}_{digest}"
    return name


def catalog_label(name: str) -> str:
    """The catalog as messages name it."""
    return repr(name) if name else f"embedded ({catalog_home() / CATALOG_FILE})"


def open_catalog(name: str, store: S3Store, bucket: str) -> Catalog:
    """The catalog ``name`` as its user configured it (empty: the embedded one),
    its FileIO reaching S3 as ``store`` does.

    Raises:
        ConfigError: no catalog of that name is configured.
        any error of the catalog's own: it cannot be reached or set up.
    """
    if name:
        configured = Config().get_catalog_config(name)
        if configured is None:
            raise ConfigError(
                f"iceberg_catalog {name!r} is not configured: PyIceberg finds no catalog "
                f"{name.lower()!r} in .pyiceberg.yaml ($PYICEBERG_HOME, ~ or the working "
                "directory) nor PYICEBERG_CATALOG__<NAME>__* variables"
            )
        properties = {k: v for k, v in configured.items() if isinstance(v, str)}
    else:
        catalog_home().mkdir(parents=True, exist_ok=True)
        properties = {"type": "sql", "uri": embedded_uri(), "warehouse": f"s3://{bucket}"}
    added = file_io_properties(store, properties)
    properties.update(added)
    endpoint = str(store.client.meta.endpoint_url or "")
    if (
        "s3.access-key-id" in added
        and properties.get(PY_IO_IMPL) == SINGLE_REQUEST_IO
        and properties.get("s3.endpoint", endpoint) == endpoint
    ):
        # The catalog reaches S3 as the store does: its metadata reads go through
        # the store's client, one request each.
        read_with(bucket, properties, store)
    try:
        # Keyword properties win over the configuration PyIceberg read at import,
        # so the fresh configuration above is the one in force.
        return load_catalog(name or EMBEDDED_CATALOG, **properties)
    except Exception as exc:
        masked = _masked(str(exc), [v for k, v in added.items() if k in _SECRET_KEYS])
        if masked is None:
            raise
    # Raised here, not in the handler, so the original is not its context either.
    raise ValueError(masked)


def _masked(text: str, secrets: list[str]) -> str | None:
    """``text`` with the secrets masked, None when it holds none (PyIceberg quotes
    a catalog's properties in some errors)."""
    if not any(secret in text for secret in secrets):
        return None
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def file_io_properties(store: S3Store, configured: dict[str, str]) -> dict[str, str]:
    """The S3 FileIO properties of ``store`` that ``configured`` lacks: the FileIO
    (:mod:`.iceberg_io`, unless one is configured), endpoint (none for AWS),
    region (PyIceberg would otherwise ask AWS for the bucket's), and credentials
    unless the configuration names any of its own."""
    added: dict[str, str] = {}
    if PY_IO_IMPL not in configured:
        # Metadata written one request an object (no multipart upload to leave
        # pending after a lost answer), and every write's end noted.
        added[PY_IO_IMPL] = SINGLE_REQUEST_IO
    client = store.client
    endpoint = str(client.meta.endpoint_url or "")
    host = urlsplit(endpoint).hostname or ""
    if "s3.endpoint" not in configured and endpoint and not _aws(host):
        added["s3.endpoint"] = endpoint
    if "s3.region" not in configured and "client.region" not in configured:
        added["s3.region"] = str(client.meta.region_name or "us-east-1")
    if not any(key in configured for key in _CREDENTIAL_KEYS):
        credentials = frozen_credentials(client)
        if credentials is not None:
            added["s3.access-key-id"] = credentials.access_key
            added["s3.secret-access-key"] = credentials.secret_key
            if credentials.token:
                added["s3.session-token"] = credentials.token
    return added


def _aws(host: str) -> bool:
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn", ".api.aws"))


def reason(exc: BaseException) -> str:
    """One line saying why a catalog call failed, fit for a message: no URL's
    credentials, no SQL statement, no traceback."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = redact(" ".join(text.split()))
    text = text if len(text) <= 300 else text[:300] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
