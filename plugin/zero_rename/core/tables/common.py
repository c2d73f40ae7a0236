"""What both table formats need of the job: the files' Arrow schema, and the
credentials the store signs with (handed to the format's own S3 client in
memory, never written or logged)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import pyarrow as pa

from zero_rename.core.s3.client import botocore_session
from zero_rename.errors import ConfigError


def files_schema(encoded: str) -> pa.Schema | None:
    """The files' Arrow schema from its base64 IPC bytes (a task manifest's
    ``table_schema``); None for "" (the writer gave none).

    Raises:
        ConfigError: for text that is not one.
    """
    if not encoded:
        return None
    try:
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(encoded, validate=True)))
    except (binascii.Error, ValueError, pa.ArrowException) as exc:
        raise ConfigError(
            f"the files' schema is not a base64 Arrow IPC schema ({len(encoded)} characters)"
        ) from exc


def frozen_credentials(client: Any) -> Any:
    """The credentials the store's client signs with, frozen now (a refreshing set is
    read once per table opened: a commit takes seconds), else those of boto3's
    chain; None where there are none (an unsigned store)."""
    get = getattr(client, "_get_credentials", None)
    credentials = get() if get is not None else None
    if credentials is None:
        credentials = botocore_session().get_credentials()
    return credentials.get_frozen_credentials() if credentials is not None else None
