"""Partition values as Spark writes them in directory names, and splitting batches by them.

Spark casts a partition value to a string before escaping it into
``column=value``: dates as ``yyyy-MM-dd``, integers in decimal, booleans as
``true``/``false``. Arrow's casts to string produce exactly these for the
types below; for others (floating point, decimals, timestamps) Spark's text
depends on its own formatting rules or the session time zone, so they are
refused rather than written under names Spark would read back differently
(on the driver, :mod:`zero_rename.spark.schema` checks Spark's types alike).
The escaping itself (and null/empty -> ``__HIVE_DEFAULT_PARTITION__``) is the
core's :func:`zero_rename.core.data.layout.partition_dir`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa

from zero_rename.errors import ConfigError
from zero_rename.spark.schema import SUPPORTED_TYPES

PartitionValues = dict[str, str | None]


def check_partition_type(column: str, arrow_type: pa.DataType) -> None:
    """Raise ConfigError unless values of ``arrow_type`` name directories as Spark names them."""
    if not (
        pa.types.is_string(arrow_type)
        or pa.types.is_large_string(arrow_type)
        or pa.types.is_integer(arrow_type)
        or pa.types.is_boolean(arrow_type)
        or pa.types.is_date32(arrow_type)
    ):
        raise ConfigError(
            f"partition column {column!r} has type {arrow_type}; partition "
            f"columns may be of types {SUPPORTED_TYPES}"
        )


def partition_strings(values: pa.Array) -> pa.Array:
    """The text Spark puts in a directory name for each value (nulls stay null)."""
    check_partition_type("(value)", values.type)
    return values.cast(pa.string())


def split_by_partition(
    batch: pa.RecordBatch, columns: Sequence[str]
) -> Iterator[tuple[PartitionValues, pa.RecordBatch]]:
    """Yield (partition values, rows of that partition without the partition columns).

    Rows keep their order within a partition. Empty strings become None, the
    null partition, as in Spark.
    """
    if not columns:
        yield {}, batch
        return
    data = batch.drop_columns(list(columns))
    keys = [partition_strings(batch.column(c)) for c in columns]
    if all(len(k.unique()) == 1 for k in keys):
        # Input sorted or clustered by partition: the common case costs no copy.
        yield _values(columns, [k[0].as_py() for k in keys]), data
        return
    table = pa.table(
        {
            **{f"k{i}": k for i, k in enumerate(keys)},
            "row": pa.array(range(batch.num_rows), pa.int64()),
        }
    )
    # use_threads=False keeps each group's rows in input order.
    groups = table.group_by([f"k{i}" for i in range(len(keys))], use_threads=False).aggregate(
        [("row", "list")]
    )
    key_columns = [groups.column(f"k{i}").to_pylist() for i in range(len(keys))]
    for i, rows in enumerate(groups.column("row_list").to_pylist()):
        yield _values(columns, [k[i] for k in key_columns]), data.take(pa.array(rows, pa.int64()))


def _values(columns: Sequence[str], texts: Sequence[str | None]) -> PartitionValues:
    return {c: (t if t else None) for c, t in zip(columns, texts, strict=True)}
