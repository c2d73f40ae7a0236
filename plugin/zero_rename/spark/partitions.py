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

import functools
import itertools
from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

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
    # Grouped by a stable sort of the values' dictionary codes, not by Arrow's
    # group_by: that, like any pa.array or pa.scalar of Python values, has
    # pyarrow import pandas, about 0.4 s of CPU in each fresh task worker.
    codes = [k.dictionary_encode(null_encoding="encode").indices for k in keys]
    names = [f"k{i}" for i in range(len(codes))]
    order = pc.sort_indices(
        pa.table(dict(zip(names, codes, strict=True))), sort_keys=[(n, "ascending") for n in names]
    )
    last = batch.num_rows - 1
    ordered = [c.take(order) for c in codes]
    changed = [pc.not_equal(c.slice(1), c.slice(0, last)) for c in ordered]
    ends = [i + 1 for i in pc.indices_nonzero(functools.reduce(pc.or_, changed)).to_pylist()]
    for start, end in itertools.pairwise([0, *ends, batch.num_rows]):
        rows = order.slice(start, end - start)
        first = rows[0].as_py()
        yield _values(columns, [k[first].as_py() for k in keys]), data.take(rows)


def _values(columns: Sequence[str], texts: Sequence[str | None]) -> PartitionValues:
    return {c: (t if t else None) for c, t in zip(columns, texts, strict=True)}
