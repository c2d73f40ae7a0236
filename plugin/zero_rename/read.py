"""Reading a destination's committed state into Arrow, for pandas, DuckDB and Polars.

``read_table(dest)`` reads exactly the files of the committed state
(:mod:`zero_rename.core.views.snapshot`): never part of a job, never a partition
with old and new files of a replace side by side, never an empty one during
it. ``read_dataset(dest)`` gives the same files as a ``pyarrow.dataset.Dataset``
to scan lazily; filters on partition columns skip whole files.

The files are read through Arrow's own S3 client, with the endpoint, region
and addressing of the store settings and credentials from boto3's standard
chain (the same ones the committer uses).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from zero_rename.core import (
    Committer,
    Destination,
    StoreConfig,
    TableSnapshot,
    credentials_and_region,
    environment_endpoint,
)
from zero_rename.errors import ConfigError

# pyarrow.dataset is imported where a dataset is made: its import loads pandas
# too, about 0.8 s of CPU, and Spark's read workers take only ``filesystem``.
if TYPE_CHECKING:
    import pyarrow.dataset as ds

log = logging.getLogger(__name__)

# Reads of a destination whose files a replace job deleted meanwhile.
READ_ROUNDS = 5
# Spark's name for a null partition value's directory; Arrow reads it as null.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"

Filters = Any  # a pyarrow.compute.Expression, or DNF tuples as pyarrow.parquet takes


def snapshot(
    dest: str, store_config: StoreConfig | None = None, as_of_job: str | None = None
) -> TableSnapshot:
    """The committed state of ``dest`` (an ``s3://bucket/prefix`` URL)."""
    destination = Destination.parse(dest)
    return Committer(destination, store_config).snapshot(as_of_job)


def read_dataset(
    dest: str,
    store_config: StoreConfig | None = None,
    as_of_job: str | None = None,
    schema: pa.Schema | None = None,
) -> ds.Dataset:
    """A dataset of the committed files of ``dest``, its partition columns from the
    ``column=value`` directories (types inferred, as Spark infers them, unless
    ``schema`` names them)."""
    config = store_config or StoreConfig()
    state = snapshot(dest, config, as_of_job)
    return dataset_of(state, config, schema)


def read_table(
    dest: str,
    filters: Filters = None,
    columns: list[str] | None = None,
    store_config: StoreConfig | None = None,
    as_of_job: str | None = None,
    schema: pa.Schema | None = None,
) -> pa.Table:
    """The committed rows of ``dest`` as one Arrow table (``.to_pandas()`` for pandas).

    A replace job that commits while the files are read deletes files of the
    snapshot being read; the read then fails (a missing file, or a response cut
    off mid-file). When the committed state changed meanwhile, the read starts
    again from the new state; otherwise the error is the read's own.
    """
    config = store_config or StoreConfig()
    for attempt in range(1, READ_ROUNDS + 1):
        state = snapshot(dest, config, as_of_job)
        try:
            dataset = dataset_of(state, config, schema)
            return dataset.to_table(columns=columns, filter=_expression(filters))
        except OSError:
            if attempt == READ_ROUNDS or not _changed(state, dest, config, as_of_job):
                raise
            log.info(
                "the committed state of %s changed while it was read (a replace deleted "
                "files of it); reading the new state",
                dest,
            )
    raise AssertionError("unreachable")


def _changed(state: TableSnapshot, dest: str, config: StoreConfig, as_of_job: str | None) -> bool:
    now = snapshot(dest, config, as_of_job)
    return {f.key for f in now.files} != {f.key for f in state.files}


def dataset_of(
    state: TableSnapshot, config: StoreConfig, schema: pa.Schema | None = None
) -> ds.Dataset:
    import pyarrow.dataset as ds

    destination = Destination.parse(state.destination)
    base = f"{destination.bucket}/{destination.dir}".rstrip("/")
    paths = [f"{destination.bucket}/{f.key}" for f in state.files]
    columns = state.partition_columns()
    partitioning: Any = None
    if columns:
        partitioning = (
            ds.HivePartitioning(
                pa.schema([schema.field(c) for c in columns]), null_fallback=NULL_PARTITION
            )
            if schema is not None and all(c in schema.names for c in columns)
            else ds.HivePartitioning.discover(infer_dictionary=False, null_fallback=NULL_PARTITION)
        )
    if not paths:
        return ds.dataset(pa.table({}) if schema is None else schema.empty_table())
    return ds.dataset(
        paths,
        schema=schema,
        format="parquet",
        filesystem=filesystem(config),
        partitioning=partitioning,
        partition_base_dir=base,
    )


def filesystem(config: StoreConfig) -> pafs.S3FileSystem:
    """Arrow's S3 client for the store: endpoint, region, addressing, credentials."""
    credentials, region = credentials_and_region(config)
    options: dict[str, Any] = {"region": region}
    if credentials is not None:
        options.update(
            access_key=credentials.access_key,
            secret_key=credentials.secret_key,
            session_token=credentials.token,
        )
    else:
        options["anonymous"] = True
    # As botocore does for the snapshot's requests: the files are read from
    # the store the job records were read from.
    endpoint = config.endpoint_url or environment_endpoint()
    if endpoint:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"endpoint {endpoint!r} is not an http(s) URL")
        options.update(endpoint_override=parts.netloc, scheme=parts.scheme)
    if config.path_style is False:
        options["force_virtual_addressing"] = True
    return pafs.S3FileSystem(**options)


def _expression(filters: Filters) -> Any:
    import pyarrow.dataset as ds

    if filters is None or isinstance(filters, ds.Expression):
        return filters
    return pq.filters_to_expression(filters)
