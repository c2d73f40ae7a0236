"""The DataFrame's schema as the driver checks it, without pyarrow.

Spark runs a Python data source's job setup and job commit in Python workers
it starts on the driver for each write, and a fresh worker pays for every
module it imports before it does anything. So the driver's checks of the
schema read Spark's own types: whether every column converts to Arrow (the
tasks hand Spark's rows over as Arrow batches), and whether the partition
columns' values name directories as Spark names them. pyarrow is imported
only where the Arrow schema itself is needed: in the tasks, for a table
format's schema at job setup, and to try the conversion of a type outside
the common ones.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from zero_rename.errors import ConfigError
from zero_rename.spark import FORMAT

if TYPE_CHECKING:
    import pyarrow as pa

# The footer keys the writer records the DataFrame's types under. Spark's own:
# with it Spark reads back exactly the types written (byte, short, char/varchar...).
SPARK_SCHEMA_KEY = "org.apache.spark.sql.parquet.row.metadata"
# The partition columns' Spark types, which the paths alone cannot say: a
# reader gives them back as written (a string column stays a string).
PARTITION_SCHEMA_KEY = "zero_rename.partition.schema"

# Spark types whose values, cast to text by Arrow in the tasks, read as Spark
# writes them in directory names (zero_rename.spark.partitions checks the
# Arrow types the same way).
PARTITION_TYPES = (StringType, ByteType, ShortType, IntegerType, LongType, BooleanType, DateType)
SUPPORTED_TYPES = "string, tinyint, smallint, int, bigint, boolean, date"

# Atomic types every supported pyspark converts to Arrow
# (pyspark.sql.pandas.types.to_arrow_type). A schema of these (in arrays, maps
# and structs) is writable without trying; any other type (intervals, char
# and varchar, variants, user-defined types...) is tried with pyspark's own
# conversion, which imports pyarrow, so the answer stays pyspark's.
_CONVERTIBLE = (
    BooleanType,
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DecimalType,
    StringType,
    BinaryType,
    DateType,
    TimestampType,
    TimestampNTZType,
    NullType,
)


def footer_metadata(schema: StructType, partition_columns: Sequence[str]) -> dict[str, str]:
    """What every file's footer records of the DataFrame's types."""
    return {
        SPARK_SCHEMA_KEY: StructType(
            [f for f in schema.fields if f.name not in partition_columns]
        ).json(),
        PARTITION_SCHEMA_KEY: StructType(
            [f for f in schema.fields if f.name in partition_columns]
        ).json(),
    }


def resolve_columns(requested: Sequence[str], available: Sequence[str]) -> tuple[str, ...]:
    """Match partition columns to the schema's names, case-insensitively as Spark does.

    Raises:
        ConfigError: a column is missing or ambiguous, or every column would be a partition.
    """
    resolved = []
    for name in requested:
        if name in available:
            resolved.append(name)
            continue
        matches = [a for a in available if a.lower() == name.lower()]
        if len(matches) != 1:
            why = "matches several columns" if matches else "is not a column"
            raise ConfigError(
                f"partition_by column {name!r} {why} of the DataFrame (columns: {list(available)})"
            )
        resolved.append(matches[0])
    if resolved and len(resolved) >= len(available):
        raise ConfigError(
            "partition_by names every column; at least one column must stay in the data files"
        )
    return tuple(resolved)


def check_partition_types(schema: StructType, columns: Sequence[str]) -> None:
    """Raise ConfigError unless every partition column is a column of ``schema``
    whose values name directories as Spark names them."""
    types = {f.name: f.dataType for f in schema.fields}
    for column in columns:
        if column not in types:
            raise ConfigError(
                f"partition column {column!r} is not a column of the "
                f"DataFrame (columns: {schema.fieldNames()})"
            )
        if not isinstance(types[column], PARTITION_TYPES):
            raise ConfigError(
                f"partition column {column!r} has type {types[column].simpleString()}; "
                f"partition columns may be of types {SUPPORTED_TYPES}"
            )


def check_writable(schema: StructType) -> None:
    """Raise ConfigError if the tasks could not receive ``schema`` as Arrow batches."""
    if not all(_convertible(f.dataType) for f in schema.fields):
        arrow_schema(schema)  # pyspark's own conversion decides


def _convertible(data_type: DataType) -> bool:
    if isinstance(data_type, ArrayType):
        return _convertible(data_type.elementType)
    if isinstance(data_type, MapType):
        return _convertible(data_type.keyType) and _convertible(data_type.valueType)
    if isinstance(data_type, StructType):
        return all(_convertible(f.dataType) for f in data_type.fields)
    return isinstance(data_type, _CONVERTIBLE)


def arrow_schema(schema: StructType) -> pa.Schema:
    """The files' Arrow schema (partition columns included, as Spark has them).
    Imports pyarrow."""
    try:
        return spark_to_arrow(schema)
    except Exception as exc:  # pyspark refuses some types (intervals, variants...)
        raise ConfigError(f"format {FORMAT!r} cannot write this schema: {exc}") from None


def spark_to_arrow(schema: StructType) -> pa.Schema:
    """pyspark's own conversion, timestamps in UTC as Spark hands them over, on
    every Spark 4 release: 4.2 takes ``timezone``, where 4.0 and 4.1 took
    ``timestamp_utc`` (an unknown keyword is a TypeError in either)."""
    import inspect

    from pyspark.sql.pandas.types import to_arrow_schema

    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone="UTC")
    return to_arrow_schema(schema, timestamp_utc=True)  # type: ignore[call-arg]


def arrow_to_spark(schema: pa.Schema) -> StructType:
    """pyspark's own conversion back, a timestamp without time zone as
    ``TimestampNTZType`` (4.2's default; 4.0 and 4.1 defaulted otherwise)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema, prefer_timestamp_ntz=True)


def table_schema(schema: StructType) -> str:
    """The files' Arrow schema as a table format takes it: IPC, base64, the same
    text in every task's manifest. Imports pyarrow."""
    return base64.b64encode(arrow_schema(schema).serialize().to_pybytes()).decode()
