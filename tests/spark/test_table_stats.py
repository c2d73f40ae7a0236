"""What the Spark writer records for a table format: each file's column statistics,
from the footer it wrote, and the DataFrame's schema, in the task manifests."""

from __future__ import annotations

import base64
import datetime
import decimal
import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import table_stub
from zero_rename.core.data.model import ColumnStats, FileStats
from zero_rename.errors import ConfigError
from zero_rename.spark.options import FileOptions, parse_writer_options
from zero_rename.spark.parquet import PartitionedParquetWriter, file_stats


def footer(table: pa.Table, **options: Any) -> pq.FileMetaData:
    out = io.BytesIO()
    pq.write_table(table, out, **options)
    return pq.read_metadata(pa.BufferReader(out.getvalue()))


def every_spark_type() -> pa.Table:
    """A column of each type Spark's schema maps to Arrow, with a null in each."""
    ts = pa.timestamp("us", tz="UTC")
    return pa.table(
        {
            "byte": pa.array([3, None, -7], pa.int8()),
            "short": pa.array([300, None, -2], pa.int16()),
            "int": pa.array([1, None, 2**31 - 1], pa.int32()),
            "long": pa.array([-(2**63), None, 5], pa.int64()),
            "flag": pa.array([False, None, True]),
            "name": pa.array(["éa", None, "Zz"]),
            "day": pa.array([datetime.date(2024, 2, 29), None, datetime.date(999, 1, 1)]),
            "at": pa.array(
                [
                    datetime.datetime(2024, 1, 1, 23, 59, 59, 999999),
                    None,
                    datetime.datetime(1970, 1, 1),
                ],
                ts,
            ),
            "local": pa.array(
                [datetime.datetime(2024, 1, 1, 0, 0, 0, 1), None, datetime.datetime(2023, 6, 1)],
                pa.timestamp("us"),
            ),
            "price": pa.array(
                [decimal.Decimal("0.00"), None, decimal.Decimal("-4.50")], pa.decimal128(10, 2)
            ),
            "wide": pa.array(
                [decimal.Decimal("1E-10"), None, decimal.Decimal("0E-10")], pa.decimal128(38, 10)
            ),
            "ratio": pa.array([1.5, None, float("nan")]),
            "real": pa.array([1.5, None, -1.0], pa.float32()),
            "blob": pa.array([b"\x00", None, b"\xff"]),
            "point": pa.array([{"x": 1}, None, {"x": 2}]),
            "tags": pa.array([["a"], None, []]),
            "nothing": pa.array([None, None, None], pa.int64()),
        }
    )


def test_footer_statistics_as_json_scalars_for_every_spark_type() -> None:
    stats = file_stats(footer(every_spark_type()))
    assert stats.columns == {
        "byte": ColumnStats(nulls=1, min=-7, max=3),
        "short": ColumnStats(nulls=1, min=-2, max=300),
        "int": ColumnStats(nulls=1, min=1, max=2**31 - 1),
        "long": ColumnStats(nulls=1, min=-(2**63), max=5),
        "flag": ColumnStats(nulls=1, min=False, max=True),
        "name": ColumnStats(nulls=1, min="Zz", max="éa"),  # UTF-8 byte order
        "day": ColumnStats(nulls=1, min="0999-01-01", max="2024-02-29"),
        "at": ColumnStats(
            nulls=1, min="1970-01-01T00:00:00.000000+00:00", max="2024-01-01T23:59:59.999999+00:00"
        ),
        "local": ColumnStats(
            nulls=1, min="2023-06-01T00:00:00.000000", max="2024-01-01T00:00:00.000001"
        ),
        "price": ColumnStats(nulls=1, min="-4.50", max="0.00"),
        "wide": ColumnStats(nulls=1, min="0.0000000000", max="0.0000000001"),
        # No bounds: NaN is outside a footer's float bounds; binary is not JSON.
        "ratio": ColumnStats(nulls=1),
        "real": ColumnStats(nulls=1),
        "blob": ColumnStats(nulls=1),
        "nothing": ColumnStats(nulls=3),
    }
    # Nested columns have leaves, not statistics of their own: left out.
    assert "point" not in stats.columns and "tags" not in stats.columns
    # Exactly the same through the manifest's JSON (booleans stay booleans).
    again = FileStats.model_validate_json(stats.model_dump_json())
    assert again == stats and again.columns["flag"].min is False


def test_row_groups_merge_and_an_unbounded_one_drops_the_bounds() -> None:
    table = pa.table(
        {
            "id": pa.array([5, 9, None, None, 1, 2], pa.int64()),
            "s": pa.array(["m", "n", None, None, "x" * 5000, "a"]),
        }
    )
    # Row groups of two rows: [5, 9], [null, null], [1, 2]; the string column's
    # third group holds a value over 4 KiB, for which the footer keeps no bounds.
    stats = file_stats(footer(table, row_group_size=2))
    assert stats.columns["id"] == ColumnStats(nulls=2, min=1, max=9)
    assert stats.columns["s"] == ColumnStats(nulls=2)


def test_a_footer_without_statistics_gives_none() -> None:
    stats = file_stats(footer(pa.table({"id": [1, 2]}), write_statistics=False))
    assert stats.columns == {"id": ColumnStats()}


class Sink(io.BytesIO):
    rows: int | None = None
    stats: FileStats | None = None

    def close(self) -> None:
        self.final = self.getvalue()
        super().close()


def test_the_writer_gives_each_file_its_own_footers_statistics() -> None:
    sinks: list[Sink] = []

    def open_file(values: dict[str, str | None]) -> Sink:
        sinks.append(Sink())
        return sinks[-1]

    batch = pa.record_batch({"id": list(range(10)), "dt": ["a", "b"] * 5})
    writer = PartitionedParquetWriter(
        open_file, ("dt",), FileOptions(max_rows_per_file=3), collect_stats=True
    )
    writer.write(batch)
    written = writer.close()
    # Files finish in another order than they open.
    assert len(sinks) == 4
    assert sorted(repr(w.stats) for w in written) == sorted(repr(s.stats) for s in sinks)
    for sink in sinks:
        ids = pq.read_table(pa.BufferReader(sink.final)).column("id").to_pylist()
        assert sink.stats == FileStats(
            columns={"id": ColumnStats(nulls=0, min=min(ids), max=max(ids))}
        )
    # Without a table format nothing is collected.
    plain = PartitionedParquetWriter(open_file, ("dt",), FileOptions())
    plain.write(batch)
    assert all(w.stats is None for w in plain.close())


def test_table_options_are_job_options_of_the_writer() -> None:
    config = parse_writer_options(
        {
            "path": "s3://bucket-x/t",
            "endpoint": "http://127.0.0.1:1",
            "table_format": "iceberg",
            "iceberg_catalog": "prod",
            "iceberg_table": "sales.events",
        }
    )
    job = config.job
    assert (job.table_format, job.iceberg_catalog, job.iceberg_table) == (
        "iceberg",
        "prod",
        "sales.events",
    )
    assert {"table_format", "iceberg_catalog", "iceberg_table"} <= config.explicit
    blank = parse_writer_options({"path": "s3://bucket-x/t", "table_format": ""}).job
    assert blank.table_format == "none"
    with pytest.raises(ConfigError, match="table_format"):
        parse_writer_options({"path": "s3://bucket-x/t", "table_format": "hudi"})
    with pytest.raises(ConfigError, match="iceberg_table"):
        parse_writer_options({"path": "s3://bucket-x/t", "iceberg_table": "no-namespace"})


@pytest.mark.s3
def test_the_writer_checks_the_table_at_setup_and_records_stats_and_schema(
    dest: str, committer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from zero_rename.spark.datasource import ZeroRenameWriter

    calls = table_stub.install(monkeypatch, "delta")
    schema = StructType([StructField("id", LongType()), StructField("dt", StringType())])
    options = {"path": dest, "partition_by": "dt", "table_format": "delta"}
    writer = ZeroRenameWriter(parse_writer_options(options), schema)
    arrow = pa.schema([("id", pa.int64()), ("dt", pa.string())])
    expected_schema = base64.b64encode(arrow.serialize().to_pybytes()).decode()
    assert calls.checks == [(dest, expected_schema, ("dt",))]

    batch = pa.record_batch({"id": [3, 1, 2], "dt": ["x", "y", "x"]})
    manifest = writer.write_attempt(0, 0, iter([batch])).manifest()
    assert manifest.table_schema == expected_schema
    assert pa.ipc.read_schema(pa.py_buffer(base64.b64decode(manifest.table_schema))) == arrow
    stats = {u.partition["dt"]: u.stats for u in manifest.uploads}
    assert stats == {
        "x": FileStats(columns={"id": ColumnStats(nulls=0, min=2, max=3)}),
        "y": FileStats(columns={"id": ColumnStats(nulls=0, min=1, max=1)}),
    }

    # A table the schema does not fit refuses the write before any job exists.
    other = f"{dest}-other"
    calls.refuse_schema = expected_schema
    with pytest.raises(ConfigError, match="other columns"):
        ZeroRenameWriter(parse_writer_options({**options, "path": other}), schema)
    assert list(committer.store.list_objects(committer.dest.bucket, "table-other/")) == []


@pytest.mark.s3
def test_an_orchestrated_writer_checks_the_table_its_job_names(
    dest: str, committer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The orchestrator's setup knew no schema: the writer, which does, checks."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from zero_rename.spark.datasource import ZeroRenameWriter

    calls = table_stub.install(monkeypatch, "iceberg")
    job = committer.setup_job(
        {"partition_columns": "dt", "table_format": "iceberg", "iceberg_table": "ns.t"}
    )
    assert calls.checks == [("ns.t", "", ("dt",))]
    schema = StructType([StructField("id", LongType()), StructField("dt", StringType())])
    writer = ZeroRenameWriter(parse_writer_options({"path": dest, "job_id": job.job_id}), schema)
    assert calls.checks[1:] == [("ns.t", writer.table_schema, ("dt",))]
    with pytest.raises(ConfigError, match='table_format="delta" disagrees'):
        ZeroRenameWriter(
            parse_writer_options({"path": dest, "job_id": job.job_id, "table_format": "delta"}),
            schema,
        )


@pytest.mark.s3
def test_a_job_without_a_table_format_records_its_schema_but_no_stats(dest: str) -> None:
    from pyspark.sql.types import LongType, StructField, StructType

    from zero_rename.spark.datasource import ZeroRenameWriter

    writer = ZeroRenameWriter(
        parse_writer_options({"path": dest}), StructType([StructField("id", LongType())])
    )
    manifest = writer.write_attempt(0, 0, iter([pa.record_batch({"id": [1]})])).manifest()
    assert writer.table_schema == ""  # nothing computed on the driver
    schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(manifest.table_schema)))
    assert schema.names == ["id"] and manifest.uploads[0].stats is None
