"""What an Iceberg commit says of a job's files, built from what the writer recorded.

PyIceberg's ``add_files`` reads every file's footer (three requests a file) and
takes partition values from columns inside the file, which Spark's files do not
have: a file of ``dt=2024-01-01/`` would be registered with ``dt=null``. So the
data files are described here from the task manifests instead: the path as
written, the partition from the directory, the size and row count, and each
column's null count and bounds from :class:`~zero_rename.core.data.model.FileStats`,
converted to the Iceberg type's bytes. Publishing then sends no request per file.

The partition columns get bounds too (lower = upper = the partition value):
PyIceberg tells a concurrent commit's files apart from a replace's by column
bounds alone, so without them a replace of one partition would conflict with
any concurrent commit to another.
"""

from __future__ import annotations

import functools
import math
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation
from typing import Any

import pyarrow as pa
from pyiceberg.conversions import partition_to_py, to_bytes
from pyiceberg.exceptions import ResolveError
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, EqualTo, IsNull, Or
from pyiceberg.expressions.visitors import inclusive_projection, manifest_evaluator
from pyiceberg.io.pyarrow import (
    MetricModeTypes,
    StatisticsCollector,
    UnsupportedPyArrowTypeException,
    _pyarrow_to_schema_without_ids,
    compute_statistics_plan,
)
from pyiceberg.manifest import (
    DATA_FILE_TYPE,
    DEFAULT_READ_VERSION,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestFile,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema, assign_fresh_schema_ids, promote
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)
from pyiceberg.utils.concurrent import ExecutorFactory
from pyiceberg.utils.datetime import date_str_to_days, datetime_to_micros
from pyiceberg.utils.truncate import truncate_upper_bound_text_string

from zero_rename.core.data.model import Bound, ColumnStats
from zero_rename.core.tables.base import TableFile
from zero_rename.errors import ConfigError

# Iceberg's first partition field id (the spec's convention, as PyIceberg assigns).
_FIRST_PARTITION_FIELD_ID = 1000
_FORMATS = {".parquet": FileFormat.PARQUET, ".orc": FileFormat.ORC, ".avro": FileFormat.AVRO}
_FRACTION = re.compile(r"T[\d:]+\.(\d+)")


def iceberg_schema(files: pa.Schema, partition_columns: Sequence[str]) -> Schema:
    """The table schema for files of this Arrow schema: its columns with fresh field
    ids, and each partition column the files lack as an optional string (Spark
    keeps partition values in the path only).

    Raises:
        ConfigError: a column type Iceberg has no type for.
    """
    try:
        converted = _pyarrow_to_schema_without_ids(files)
    except (ValueError, TypeError, UnsupportedPyArrowTypeException) as exc:
        raise ConfigError(f"the files' schema has no Iceberg equivalent: {_one_line(exc)}") from exc
    # A partition column lives in the path only: the files cannot hold it, so the
    # table may not call it required (a scan would look for it in the files).
    fields = [
        f.model_copy(update={"required": False}) if f.name in partition_columns else f
        for f in converted.fields
    ]
    known = {f.name for f in fields}
    fields += [
        NestedField(field_id=0, name=column, field_type=StringType(), required=False)
        for column in partition_columns
        if column not in known
    ]
    counter = iter(range(1, 1 << 31))
    return assign_fresh_schema_ids(Schema(*fields), lambda: next(counter))


def identity_spec(schema: Schema, partition_columns: Sequence[str]) -> PartitionSpec:
    return PartitionSpec(
        *(
            PartitionField(
                source_id=schema.find_field(column).field_id,
                field_id=_FIRST_PARTITION_FIELD_ID + i,
                transform=IdentityTransform(),
                name=column,
            )
            for i, column in enumerate(partition_columns)
        )
    )


def spec_problem(metadata: TableMetadata, partition_columns: Sequence[str]) -> str | None:
    """What keeps the table's partition spec from being identity on exactly the
    job's partition columns, in their order; None when it is."""
    schema, spec = metadata.schema(), metadata.spec()
    have = [(schema.find_column_name(f.source_id), str(f.transform).lower()) for f in spec.fields]
    want = [(column, "identity") for column in partition_columns]
    if have == want:
        return None
    shown = ", ".join(f"{t}({c})" for c, t in have) or "unpartitioned"
    wanted = ", ".join(f"identity({c})" for c in partition_columns) or "unpartitioned"
    return f"the table is partitioned by {shown}, the job by {wanted}"


def schema_problems(table: Schema, files: pa.Schema, partition_columns: Sequence[str]) -> list[str]:
    """How files of this Arrow schema do not fit the table: a column the table lacks,
    a type it cannot read as its own, a required column they lack or may leave null."""
    ours = iceberg_schema(files, partition_columns)
    problems = []
    for field in ours.fields:
        try:
            theirs = table.find_field(field.name)
        except ValueError:
            problems.append(f"column {field.name!r} is not in the table")
            continue
        if not _readable_as(field.field_type, theirs.field_type):
            problems.append(
                f"column {field.name!r} is {field.field_type} in the files, "
                f"{theirs.field_type} in the table"
            )
        elif theirs.required and not field.required:
            problems.append(
                f"column {field.name!r} is required in the table, nullable in the files"
            )
    names = {f.name for f in ours.fields}
    problems += [
        f"the table's required column {f.name!r} is not in the files"
        for f in table.fields
        if f.required and f.name not in names
    ]
    return problems


def _readable_as(file_type: IcebergType, table_type: IcebergType) -> bool:
    """Whether a reader of the table reads a file column of ``file_type`` as ``table_type``."""
    if isinstance(file_type, PrimitiveType) and isinstance(table_type, PrimitiveType):
        if file_type == table_type:
            return True
        try:
            promote(file_type, table_type)
        except ResolveError:
            return False
        return True
    if isinstance(file_type, StructType) and isinstance(table_type, StructType):
        theirs = {f.name: f for f in table_type.fields}
        return all(
            f.name in theirs and _readable_as(f.field_type, theirs[f.name].field_type)
            for f in file_type.fields
        )
    if isinstance(file_type, ListType) and isinstance(table_type, ListType):
        return _readable_as(file_type.element_type, table_type.element_type)
    if isinstance(file_type, MapType) and isinstance(table_type, MapType):
        return _readable_as(file_type.key_type, table_type.key_type) and _readable_as(
            file_type.value_type, table_type.value_type
        )
    return False


def partition_predicate(
    schema: Schema, columns: Sequence[str], partitions: Sequence[Mapping[str, str | None]]
) -> BooleanExpression | None:
    """The rows of these partitions (the table's, for an unpartitioned job); None
    when there are none (a partitioned job that wrote no partition)."""
    if not columns:
        return AlwaysTrue()
    terms: list[BooleanExpression] = []
    for partition in partitions:
        if set(partition) != set(columns):
            continue  # not one of the job's partitions: the protocol's ({},) for no files
        equal = [
            _equal(column, partition_value(schema, column, partition[column])) for column in columns
        ]
        terms.append(functools.reduce(And, equal))
    return functools.reduce(Or, terms) if terms else None


def _equal(column: str, value: Any) -> BooleanExpression:
    # Built through Any: PyIceberg's predicates take the column name positionally,
    # which their pydantic-derived signatures do not say.
    make: Any = IsNull if value is None else EqualTo
    made: BooleanExpression = make(column) if value is None else make(column, value)
    return made


def partition_value(schema: Schema, column: str, text: str | None) -> Any:
    """A partition value (unescaped directory text) as the column's Iceberg value;
    Spark writes an empty value as null, so it is one here too."""
    if text is None or text == "":
        return None
    field_type = schema.find_field(column).field_type
    if isinstance(field_type, StringType) or not isinstance(field_type, PrimitiveType):
        return text
    try:
        # Spark writes dates and timestamps in directory names as text
        # (2024-01-01, 2024-01-01 10:00:00); PyIceberg's own parser takes numbers.
        if isinstance(field_type, DateType):
            return date_str_to_days(text)
        if isinstance(field_type, (TimestampType, TimestamptzType)):
            moment = datetime.fromisoformat(text.replace(" ", "T", 1))
            if moment.tzinfo is None and isinstance(field_type, TimestamptzType):
                moment = moment.replace(tzinfo=UTC)
            return datetime_to_micros(moment)
        return partition_to_py(field_type, text)
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise ConfigError(
            f"partition value {text[:80]!r} is not a {field_type} for column {column!r}"
        ) from exc


def replaced_files(
    table: Table,
    columns: Sequence[str],
    partitions: Sequence[Mapping[str, str | None]],
    predicate: BooleanExpression,
) -> list[DataFile]:
    """The current data files of these partitions (all of an unpartitioned job's
    table), read from the manifests whose partition ranges match ``predicate``.

    Not a scan's ``plan_files``: it works out every file's residual against every
    partition, which took 40 s for 10,000 files. Here each manifest entry is one
    lookup. Files of an older partition spec are not a partition's (their rows
    may be of several), so a partitioned replace leaves them."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    schema, spec, spec_id = table.schema(), table.spec(), table.metadata.default_spec_id
    wanted: set[Record] | None = None
    if columns:
        names = [str(schema.find_column_name(f.source_id)) for f in spec.fields]
        wanted = {
            Record(*(partition_value(schema, c, p[c]) for c in names))
            for p in partitions
            if set(p) == set(columns)
        }
    matches = manifest_evaluator(spec, schema, inclusive_projection(schema, spec)(predicate))

    def files_of(manifest: ManifestFile) -> list[DataFile]:
        if wanted is not None and (manifest.partition_spec_id != spec_id or not matches(manifest)):
            return []
        return [
            e.data_file
            for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
            if e.data_file.content == DataFileContent.DATA
            and (wanted is None or e.data_file.partition in wanted)
        ]

    manifests = [m for m in snapshot.manifests(table.io) if m.content == ManifestContent.DATA]
    return [f for found in ExecutorFactory.get_or_create().map(files_of, manifests) for f in found]


@dataclass(frozen=True)
class _Column:
    """How one top-level column's statistics become metrics, worked out once a job."""

    field_id: int
    kind: PrimitiveType
    bounds: bool  # False: counts only (the table's metrics mode)
    convert: Callable[[Any, Bound, bool], Any]  # _convert for this type
    encode: Callable[[Any, Any], bytes]  # PyIceberg's to_bytes for this type
    width: int | None  # truncate(n) of a string column's bounds


@dataclass(frozen=True)
class _Partition:
    """One partition's value and its columns' exact metrics, worked out once a job."""

    values: tuple[Any, ...]
    # field id, whether null, the bound bytes (None: none)
    metrics: tuple[tuple[int, bool, bytes | None], ...]


class DataFiles:
    """Builds the :class:`DataFile` of each of a job's files for one table.

    What is the same for every file (each column's metrics mode and converter, each
    partition's values and bounds, the DataFile's fields in their order) is worked
    out once; per file only its own numbers are converted."""

    def __init__(self, metadata: TableMetadata, destination: str) -> None:
        self.schema = metadata.schema()
        self.spec = metadata.spec()
        self.destination = destination.rstrip("/")
        self.plan = compute_statistics_plan(self.schema, dict(metadata.properties))
        self.partition_columns = [
            str(self.schema.find_column_name(f.source_id)) for f in self.spec.fields
        ]
        self._columns = self._column_plans()
        # By the file's partition mapping, as its items come.
        self._partitions: dict[tuple[tuple[str, str | None], ...], _Partition] = {}
        fields = DATA_FILE_TYPE[DEFAULT_READ_VERSION].fields
        self._at = {f.name: i for i, f in enumerate(fields)}
        self._template = [f.initial_default for f in fields]
        self._template[self._at["content"]] = DataFileContent.DATA

    def _column_plans(self) -> dict[str, _Column]:
        columns = {}
        for field in self.schema.fields:
            collector = self.plan.get(field.field_id)
            if collector is not None and collector.mode.type != MetricModeTypes.NONE:
                columns[field.name] = _column(collector)
        return columns

    def data_file(self, file: TableFile, rows: int) -> DataFile:
        """The DataFile of ``file`` (``rows``: its record count), at
        ``<destination>/<path as written>``: escaped directory names verbatim."""
        suffix = next((s for s in _FORMATS if file.path.endswith(s)), None)
        if suffix is None:
            raise ConfigError(
                f"{file.path!r} is not a Parquet, ORC or Avro file: an Iceberg table holds no other"
            )
        partition = self._partition(file)
        counts, nulls, lower, upper = self._metrics(file, rows, partition)
        at, data = self._at, list(self._template)
        data[at["file_path"]] = f"{self.destination}/{file.path}"
        data[at["file_format"]] = _FORMATS[suffix]
        data[at["partition"]] = Record(*partition.values)
        data[at["record_count"]] = rows
        data[at["file_size_in_bytes"]] = file.size
        data[at["value_counts"]] = counts
        data[at["null_value_counts"]] = nulls
        data[at["nan_value_counts"]] = {}
        data[at["lower_bounds"]] = lower
        data[at["upper_bounds"]] = upper
        return DataFile(*data)

    def _partition(self, file: TableFile) -> _Partition:
        key = tuple(file.partition.items())
        found = self._partitions.get(key)
        if found is not None:
            return found
        missing = set(self.partition_columns) - set(file.partition)
        if missing:
            raise ConfigError(
                f"{file.path!r} names no value for partition column(s) {sorted(missing)}"
            )
        values = tuple(
            partition_value(self.schema, c, file.partition[c]) for c in self.partition_columns
        )
        metrics = []
        for name, value in zip(self.partition_columns, values, strict=True):
            # Every row of the file holds the partition value: its bounds are exact.
            field = self.schema.find_field(name)
            encoded = None
            if value is not None and isinstance(field.field_type, PrimitiveType):
                encoded = to_bytes(field.field_type, value)
            metrics.append((field.field_id, value is None, encoded))
        found = self._partitions[key] = _Partition(values, tuple(metrics))
        return found

    def _metrics(
        self, file: TableFile, rows: int, partition: _Partition
    ) -> tuple[dict[int, int], dict[int, int], dict[int, bytes], dict[int, bytes]]:
        counts: dict[int, int] = {}
        nulls: dict[int, int] = {}
        lower: dict[int, bytes] = {}
        upper: dict[int, bytes] = {}
        stats = file.stats.columns if file.stats is not None else {}
        for name, column in stats.items():
            plan = self._columns.get(name)
            if plan is None:
                continue
            counts[plan.field_id] = rows
            if column.nulls is not None:
                nulls[plan.field_id] = column.nulls
            if plan.bounds:
                low, high = _bounds(plan, column)
                if low is not None:
                    lower[plan.field_id] = low
                if high is not None:
                    upper[plan.field_id] = high
        for field_id, is_null, encoded in partition.metrics:
            counts[field_id] = rows
            nulls[field_id] = rows if is_null else 0
            lower.pop(field_id, None)
            upper.pop(field_id, None)
            if encoded is not None:
                lower[field_id] = upper[field_id] = encoded
        return counts, nulls, lower, upper


def _column(collector: StatisticsCollector) -> _Column:
    kind = collector.iceberg_type
    truncate = collector.mode.type == MetricModeTypes.TRUNCATE
    return _Column(
        field_id=collector.field_id,
        kind=kind,
        bounds=collector.mode.type != MetricModeTypes.COUNTS,
        convert=_convert.dispatch(type(kind)),
        encode=to_bytes.dispatch(type(kind)),
        width=collector.mode.length if truncate and isinstance(kind, StringType) else None,
    )


def column_bounds(
    collector: StatisticsCollector, column: ColumnStats
) -> tuple[bytes | None, bytes | None]:
    """The writer's min and max as Iceberg bound bytes, each None where it has none or
    where it cannot be converted safely (a bound must never be tighter than the data)."""
    return _bounds(_column(collector), column)


def _bounds(plan: _Column, column: ColumnStats) -> tuple[bytes | None, bytes | None]:
    kind = plan.kind
    low = _converted(plan, column.min, False) if column.min is not None else None
    high = _converted(plan, column.max, True) if column.max is not None else None
    if plan.width is not None:
        # Iceberg's truncate(n) metrics: a prefix is a lower bound; the upper one
        # is the prefix with its last character raised (None if none can be).
        low = low[: plan.width] if isinstance(low, str) else None
        high = truncate_upper_bound_text_string(high, plan.width) if isinstance(high, str) else None
    try:
        return (
            plan.encode(kind, low) if low is not None else None,
            plan.encode(kind, high) if high is not None else None,
        )
    except (ValueError, TypeError, OverflowError, struct.error):
        return None, None


def _converted(plan: _Column, value: Bound, upward: bool) -> Any:
    try:
        return plan.convert(plan.kind, value, upward)
    except (ValueError, TypeError, InvalidOperation, OverflowError):
        return None


@functools.singledispatch
def _convert(kind: PrimitiveType, value: Bound, upward: bool) -> Any:
    """No bounds for a type the writer's JSON cannot carry exactly (binary, uuid...)."""
    return None


@_convert.register
def _(kind: BooleanType, value: Bound, upward: bool) -> Any:
    return value if isinstance(value, bool) else None


@_convert.register(IntegerType)
@_convert.register(LongType)
def _(kind: PrimitiveType, value: Bound, upward: bool) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    limit = 2**31 if isinstance(kind, IntegerType) else 2**63
    return value if -limit <= value < limit else None


@_convert.register(FloatType)
@_convert.register(DoubleType)
def _(kind: PrimitiveType, value: Bound, upward: bool) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    number = float(value)
    if isinstance(kind, FloatType):
        # A bound a float32 cannot hold exactly would be rounded, maybe inward.
        exact = struct.unpack("<f", struct.pack("<f", number))[0]
        return number if exact == number else None
    return number


@_convert.register
def _(kind: StringType, value: Bound, upward: bool) -> Any:
    return value if isinstance(value, str) else None


@_convert.register
def _(kind: DateType, value: Bound, upward: bool) -> Any:
    return date.fromisoformat(value[:10]) if isinstance(value, str) else None


@_convert.register(TimestampType)
@_convert.register(TimestamptzType)
def _(kind: PrimitiveType, value: Bound, upward: bool) -> Any:
    if not isinstance(value, str):
        return None
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    micros = datetime_to_micros(moment)
    if upward:
        # Delta's statistics carry milliseconds: a max cut to them is below the
        # true max, so the upper bound is the end of the unit the text names.
        found = _FRACTION.search(value)
        digits = min(len(found.group(1)), 6) if found else 0
        micros += 10 ** (6 - digits) - 1
    return micros


@_convert.register
def _(kind: DecimalType, value: Bound, upward: bool) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    exact = Decimal(str(value))
    rounding = ROUND_CEILING if upward else ROUND_FLOOR
    scaled = exact.quantize(Decimal(1).scaleb(-kind.scale), rounding=rounding)
    return scaled if len(scaled.as_tuple().digits) <= kind.precision else None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] + ("..." if len(text) > 300 else "")
