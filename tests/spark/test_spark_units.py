"""Option parsing, partition values and the Parquet file layout, without Spark or S3."""

from __future__ import annotations

import datetime
import io
import os
import pathlib
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import CREDENTIAL_URLS, leaks
from zero_rename.errors import ConfigError
from zero_rename.spark.options import (
    DEFAULT_UPLOAD_THREADS,
    FileOptions,
    conflict_mode_for,
    parse_writer_options,
)
from zero_rename.spark.parquet import PartitionedParquetWriter
from zero_rename.spark.partitions import split_by_partition
from zero_rename.spark.schema import resolve_columns

pytestmark = pytest.mark.unit


def test_options_map_to_job_store_and_file_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    config = parse_writer_options(
        {
            "path": "s3a://bucket/table",
            "Partition_By": "dt, region",
            "committer": "staging",
            "part_size": "16MiB",
            "threads": "8",
            "max_file_size": "1g",
            "max_rows_per_file": "1000",
            "compression": "ZSTD",
            "verify_uploads": "false",
        }
    )
    assert config.destination.url == "s3://bucket/table"
    assert config.job.partition_columns == ("dt", "region")
    assert config.job.committer == "staging" and config.job.conflict_mode == "append"
    assert config.job.part_size == 16 << 20 and config.job.threads == 8
    assert config.job.verify_uploads is False
    assert config.store.endpoint_url == "http://127.0.0.1:9000"
    assert config.files == FileOptions(
        compression="zstd", max_file_size=1 << 30, max_rows_per_file=1000
    )
    assert config.files.extension == ".zstd.parquet"
    assert not config.orchestrated
    assert config.upload_threads == DEFAULT_UPLOAD_THREADS


@pytest.mark.parametrize("given,threads", [("0", 0), ("8", 8), (" 2 ", 2)])
def test_upload_threads_read_as_a_count(given: str, threads: int) -> None:
    config = parse_writer_options({"path": "s3://bucket/t", "upload_threads": given})
    assert config.upload_threads == threads


def test_an_endpoint_option_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    config = parse_writer_options({"path": "s3://bucket/t", "endpoint": "https://s3.example.test"})
    assert config.store.endpoint_url == "https://s3.example.test"
    with pytest.raises(ConfigError, match="may not carry credentials"):
        parse_writer_options({"path": "s3://bucket/t", "endpoint": "http://key:pw@host:9000"})


@pytest.mark.parametrize("url", CREDENTIAL_URLS)
@pytest.mark.parametrize("source", ["option", "environment"])
def test_an_endpoint_with_a_credential_is_refused_unechoed(
    source: str, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", url if source == "environment" else "")
    options = {"path": "s3://bucket/t", **({"endpoint": url} if source == "option" else {})}
    with pytest.raises(ConfigError) as err:
        parse_writer_options(options)
    assert "***@" in str(err.value) and not leaks(str(err.value))


@pytest.mark.parametrize(
    ("overwrite", "given", "expected"),
    [
        (False, None, "append"),
        (False, "fail", "fail"),
        (False, "replace", "replace"),
        (True, None, "replace"),
        (True, "replace", "replace"),
    ],
)
def test_save_modes_map_to_conflict_modes(
    overwrite: bool, given: str | None, expected: str
) -> None:
    assert conflict_mode_for(overwrite, given) == expected


@pytest.mark.parametrize("given", ["append", "fail"])
def test_overwrite_refuses_a_conflict_mode_that_keeps_files(given: str) -> None:
    with pytest.raises(ConfigError, match="contradicts"):
        conflict_mode_for(True, given)


@pytest.mark.parametrize(
    ("given", "conflict", "expected"),
    [
        ("ErrorIfExists", None, ("error", "fail")),
        ("error", "append", ("error", "append")),
        ("ignore", None, ("ignore", "append")),
    ],
)
def test_if_exists_stands_for_the_save_modes_spark_refuses(
    given: str, conflict: str | None, expected: tuple[str, str]
) -> None:
    options = {"path": "s3://bucket/t", "if_exists": given}
    if conflict:
        options["conflict_mode"] = conflict
    config = parse_writer_options(options)
    assert (config.if_exists, config.job.conflict_mode) == expected
    with pytest.raises(ConfigError, match="goes with mode"):
        parse_writer_options(options, overwrite=True)


def test_job_id_makes_the_write_orchestrated() -> None:
    job_id = "0b7e6f62-3c55-4a8e-9d58-2f7e0c7b6a10"
    config = parse_writer_options(
        {"path": "s3://bucket/t", "job_id": job_id, "partition_by": "dt"}, overwrite=True
    )
    assert config.orchestrated and config.job_id == job_id
    assert config.explicit == {"partition_columns", "conflict_mode"}
    assert not config.validate_output  # off by default
    # The output check of an orchestrated job is its orchestrator's step.
    with pytest.raises(ConfigError, match="validate_output is for a write that commits"):
        parse_writer_options({"path": "s3://b/t", "job_id": job_id, "validate_output": "true"})


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("8388608", 8 << 20),
        ("8m", 8 << 20),
        ("8MiB", 8 << 20),
        ("8 MB", 8 << 20),
        ("2g", 2 << 30),
        ("512k", 512 << 10),
    ],
)
def test_sizes_read_as_spark_reads_them(text: str, size: int) -> None:
    from zero_rename.spark.reader import parse_reader_options

    written = parse_writer_options({"path": "s3://bucket/t", "max_file_size": text})
    assert written.files.max_file_size == size
    read = parse_reader_options({"path": "s3://bucket/t", "max_partition_bytes": text})
    assert read.max_partition_bytes == size


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("YES", True),
        (" on ", True),
        ("1", True),
        ("false", False),
        ("No", False),
        ("off", False),
        ("0", False),
    ],
)
def test_flags_read_every_spelling(text: str, value: bool) -> None:
    from zero_rename.spark.reader import parse_reader_options

    written = parse_writer_options(
        {"path": "s3://bucket/t", "verify_uploads": text, "path_style": text}
    )
    assert written.job.verify_uploads is value and written.store.path_style is value
    assert (
        parse_reader_options({"path": "s3://bucket/t", "path_style": text}).store.path_style
        is value
    )


def test_empty_values_mean_not_given() -> None:
    config = parse_writer_options(
        {
            "path": "s3://bucket/t",
            "max_file_size": "",
            "max_rows_per_file": "",
            "if_exists": " ",
            "spool_dir": "",
            "job_id": "",
            "region": "",
            "store_profile": "",
            "endpoint": "",
        }
    )
    assert config.files == FileOptions()
    assert (config.if_exists, config.job_id, config.spool_dir) == (None, None, None)
    assert (config.store.region, config.store.profile) == (None, "auto")
    assert parse_writer_options(
        {"path": "s3://bucket/t", "part_size": None, "upload_threads": None}
    ) == parse_writer_options({"path": "s3://bucket/t"})
    with pytest.raises(ConfigError, match="option 'part_size' must be a size"):
        parse_writer_options({"path": "s3://bucket/t", "part_size": ""})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "reads a destination"),
        (
            {"path": "s3://bucket/t", "path_style": "maybe"},
            r"option 'path_style' must be true or false \(got 'maybe'\)",
        ),
        (
            {"path": "s3://bucket/t", "max_partition_bytes": "big"},
            "option 'max_partition_bytes' must be a size such as",
        ),
        ({"path": "s3://bucket/t", "as_of": "x"}, r"unknown option\(s\) \['as_of'\]"),
        ({"path": "s3://bucket/t", "as_of_job": "x"}, "job id 'x' is not a UUID"),
        ({"path": "s3://bucket/t", "secret_key": "abc"}, "credentials are never accepted"),
    ],
)
def test_malformed_reader_options_are_named(options: dict[str, str], message: str) -> None:
    from zero_rename.spark.reader import parse_reader_options

    with pytest.raises(ConfigError, match=message) as failure:
        parse_reader_options(options)
    assert "abc" not in str(failure.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "needs a destination"),
        ({"path": "hdfs://x/y"}, "must be an s3:// or s3a:// URL"),
        ({"path": "s3://bucket/t", "threads": "0"}, "threads"),
        (
            {"path": "s3://bucket/t", "upload_threads": "-1"},
            "option 'upload_threads' must be an integer",
        ),
        ({"path": "s3://bucket/t", "upload_threads": "four"}, "option 'upload_threads'"),
        ({"path": "s3://bucket/t", "verify_uploads": "maybe"}, "option 'verify_uploads'"),
        ({"path": "s3://bucket/t", "max_file_size": "0"}, "option 'max_file_size'"),
        ({"path": "s3://bucket/t", "conflict_mode": "merge"}, "option 'conflict_mode'"),
        ({"path": "s3://bucket/t", "session_token": "abc"}, "credentials are never accepted"),
        ({"path": "s3://bucket/t", "fs.s3a.secret.key": "abc"}, "credentials are never accepted"),
        ({"path": "s3://bucket/t", "compression": "rar"}, "option 'compression' must be one of"),
        ({"path": "s3://bucket/t", "max_rows_per_file": "-3"}, "option 'max_rows_per_file'"),
        ({"path": "s3://bucket/t", "job_id": "not-a-uuid"}, "job id 'not-a-uuid' is not a UUID"),
        ({"path": "s3://bucket/t", "endpoint": "ftp://x"}, "option 'endpoint' must be an http"),
        ({"path": "s3://bucket/t", "region": "bad region!"}, "region 'bad region!'"),
        (
            {"path": "s3://bucket/t", "part_size": "lots"},
            r"option 'part_size' must be a size such as 134217728, 128m or 128MiB \(got 'lots'\)",
        ),
        (
            {"path": "s3://bucket/t", "max_open_files": "0"},
            r"option 'max_open_files' must be a positive integer \(got '0'\)",
        ),
        (
            {"path": "s3://bucket/t", "upload_threads": "1", "row_group_size": "x", "threads": "0"},
            "option 'row_group_size' must be a positive integer",
        ),
        ({"path": "s3://bucket/t", "partiton_by": "dt"}, r"unknown option\(s\) \['partiton_by'\]"),
        (
            {"path": "s3://bucket/t", "if_exists": "skip"},
            r"option 'if_exists' must be one of "
            r"\['error', 'errorifexists', 'ignore'\] \(got 'skip'\)",
        ),
        (
            {
                "path": "s3://bucket/t",
                "if_exists": "ignore",
                "job_id": "1c35e82e-0afa-487d-b720-08fd69009377",
            },
            "sets up its own job",
        ),
    ],
)
def test_malformed_options_are_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as failure:
        parse_writer_options(options)
    assert "abc" not in str(failure.value)


def test_partition_columns_resolve_case_insensitively() -> None:
    assert resolve_columns(["DT"], ["id", "dt"]) == ("dt",)
    with pytest.raises(ConfigError, match="'nope' is not a column"):
        resolve_columns(["nope"], ["id", "dt"])
    with pytest.raises(ConfigError, match="every column"):
        resolve_columns(["id", "dt"], ["id", "dt"])
    with pytest.raises(ConfigError, match="matches several"):
        resolve_columns(["aB"], ["ab", "AB", "c"])


def test_the_driver_checks_the_schema_with_sparks_types() -> None:
    """What the driver refuses without pyarrow: partition columns of types whose
    directory names Spark would read back differently; and any type pyspark
    cannot hand the tasks as Arrow, tried with pyspark's own conversion."""
    from pyspark.sql import types as T

    from zero_rename.spark.schema import check_partition_types, check_writable

    common = T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("tags", T.ArrayType(T.StringType())),
            T.StructField("attrs", T.MapType(T.StringType(), T.DecimalType(10, 2))),
            T.StructField("at", T.StructType([T.StructField("ts", T.TimestampNTZType())])),
            T.StructField("dt", T.DateType()),
            T.StructField("day", T.ShortType()),
        ]
    )
    check_writable(common)
    check_partition_types(common, ("dt", "day"))
    with pytest.raises(ConfigError, match="'id' is not a column"):
        check_partition_types(T.StructType([T.StructField("x", T.LongType())]), ("id",))
    with pytest.raises(ConfigError, match=r"'ts' has type timestamp; partition columns may"):
        check_partition_types(T.StructType([T.StructField("ts", T.TimestampType())]), ("ts",))
    for refused in (T.YearMonthIntervalType(), T.ArrayType(T.CalendarIntervalType())):
        with pytest.raises(ConfigError, match="cannot write this schema"):
            check_writable(T.StructType([T.StructField("x", refused)]))
    # Outside the common types, pyspark's conversion decides: a day-time interval converts.
    check_writable(T.StructType([T.StructField("x", T.DayTimeIntervalType())]))


def test_split_by_partition_formats_values_as_spark() -> None:
    batch = pa.record_batch(
        {
            "v": [1, 2, 3, 4, 5],
            "day": pa.array(
                [
                    datetime.date(2024, 1, 1),
                    datetime.date(999, 3, 4),
                    None,
                    datetime.date(2024, 1, 1),
                    datetime.date(2024, 1, 1),
                ]
            ),
            "flag": [True, False, None, True, True],
            "name": ["a/b", "", None, "a/b", "x"],
        }
    )
    groups = {
        tuple(v.values()): b.column("v").to_pylist()
        for v, b in split_by_partition(batch, ["day", "flag", "name"])
    }
    assert groups == {
        ("2024-01-01", "true", "a/b"): [1, 4],
        ("0999-03-04", "false", None): [2],
        (None, None, None): [3],
        ("2024-01-01", "true", "x"): [5],
    }
    values, rows = next(split_by_partition(batch.slice(0, 1), ["day"]))
    assert values == {"day": "2024-01-01"} and rows.schema.names == ["v", "flag", "name"]


class MemorySink(io.BytesIO):
    rows: int | None = None

    def close(self) -> None:
        self.final = self.getvalue()
        super().close()


def _write(
    batches: list[pa.RecordBatch], columns: tuple[str, ...], options: FileOptions
) -> list[MemorySink]:
    sinks: list[MemorySink] = []

    def open_file(values: dict[str, str | None]) -> MemorySink:
        sink = MemorySink()
        sink.partition = values  # type: ignore[attr-defined]
        sinks.append(sink)
        return sink

    writer = PartitionedParquetWriter(open_file, columns, options, {"k": "v"})
    for batch in batches:
        writer.write(batch)
    writer.close()
    return sinks


def test_files_roll_at_the_row_limit_exactly() -> None:
    batch = pa.record_batch({"id": list(range(1000)), "p": ["a", "b"] * 500})
    sinks = _write([batch, batch], ("p",), FileOptions(max_rows_per_file=300))
    rows = sorted((s.partition["p"], s.rows) for s in sinks)  # type: ignore[attr-defined]
    assert rows == [("a", 100)] + [("a", 300)] * 3 + [("b", 100)] + [("b", 300)] * 3
    table = pq.read_table(pa.BufferReader(sinks[0].final))
    assert table.schema.names == ["id"] and table.schema.metadata[b"k"] == b"v"
    assert all(s.rows == pq.ParquetFile(pa.BufferReader(s.final)).metadata.num_rows for s in sinks)


def test_files_roll_near_the_size_limit_and_row_groups_stay_whole() -> None:
    values = [f"{i:064x}" for i in range(40_000)]
    batch = pa.record_batch({"h": values})
    sinks = _write([batch], (), FileOptions(max_file_size=256 * 1024, compression="none"))
    sizes = [len(s.final) for s in sinks]
    assert len(sinks) > 5 and max(sizes) <= 256 * 1024 * 1.3
    assert sum(s.rows or 0 for s in sinks) == 40_000


def test_open_files_are_bounded_least_recently_used_first() -> None:
    batch = pa.record_batch({"id": list(range(100)), "p": [str(i % 10) for i in range(100)]})
    sinks = _write([batch, batch], ("p",), FileOptions(max_open_files=3))
    assert sum(s.rows or 0 for s in sinks) == 200
    assert len(sinks) > 10  # evicted partitions start new files
    assert all(s.closed for s in sinks)


def test_spark_option_names_are_aliases() -> None:
    from zero_rename.errors import ConfigError
    from zero_rename.spark.options import parse_writer_options

    config = parse_writer_options(
        {"path": "s3://bucket-x/t", "partitionBy": "dt,region", "maxRecordsPerFile": "1000"}
    )
    assert config.job.partition_columns == ("dt", "region")
    assert config.files.max_rows_per_file == 1000
    assert (
        parse_writer_options(
            {"path": "s3://bucket-x/t", "maxRecordsPerFile": "0"}
        ).files.max_rows_per_file
        is None
    )
    with pytest.raises(ConfigError, match="same setting"):
        parse_writer_options({"path": "s3://bucket-x/t", "partitionBy": "dt", "partition_by": "dt"})
    with pytest.raises(ConfigError, match="max_rows_per_file"):
        parse_writer_options({"path": "s3://bucket-x/t", "maxRecordsPerFile": "lots"})


def test_schemas_convert_on_spark_4_0_and_4_1_as_on_4_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark 4.0 and 4.1 named the conversion's time zone ``timestamp_utc`` and
    defaulted ``prefer_timestamp_ntz`` the other way; the format runs on both
    (the peers' environment, .venv-peers, is 4.1)."""
    import pyspark.sql.pandas.types as types
    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    from zero_rename.spark.schema import arrow_schema, arrow_to_spark

    schema = StructType([StructField("s", StringType()), StructField("t", TimestampType())])
    current = arrow_schema(schema)
    convert = types.to_arrow_schema

    def spark_4_1(
        schema: StructType,
        error_on_duplicated_field_names_in_struct: bool = False,
        timestamp_utc: bool = True,
        prefers_large_types: bool = False,
    ) -> pa.Schema:
        return convert(schema, timezone="UTC" if timestamp_utc else None)

    monkeypatch.setattr(types, "to_arrow_schema", spark_4_1)
    assert arrow_schema(schema) == current
    assert current.field("t").type == pa.timestamp("us", tz="UTC")
    naive = pa.schema([("t", pa.timestamp("us"))])
    assert arrow_to_spark(naive).fields[0].dataType.typeName() == "timestamp_ntz"


PLUGIN_PROBE = '''
import os


class Probe:
    """A pydantic plugin that notes every model it is offered."""

    def new_schema_validator(self, schema, schema_type, path, kind, config, settings):
        with open(os.environ["PROBE_SEEN"], "a") as seen:
            seen.write(f"{path.module}.{path.name}\\n")
        return None, None, None


plugin = Probe()
'''

IMPORTS_AS_A_WORKER = """
import gc
import os
import sys
import pydantic
import pyspark.sql.datasource  # what Spark's worker had loaded

passes = []  # (objects frozen, the committer's import begun) at each pass
gc.callbacks.append(
    lambda phase, info: phase == "start"
    and passes.append((gc.get_freeze_count(), "zero_rename.core" in sys.modules))
)
import zero_rename.spark.datasource as datasource
import zero_rename.spark.reader
from zero_rename.spark import worker_step

datasource._import_table_format("iceberg")  # as job setup or commit with Iceberg
assert "PYDANTIC_DISABLE_PLUGINS" not in os.environ
# No collector pass from the committer's import until it froze what it made
# (the module's own classes after it are collected as usual); the collector on.
# Without bytecode on disk, compiling the worker module's own source, before
# its import of the committer, may run a pass: that is not the import's.
during = [frozen for frozen, begun in passes if begun]
assert during and min(during) > 50_000, passes[:3]
assert gc.isenabled()


def subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)


@worker_step
def first_uses():
    # Every model of the committer built as a step's first use of it builds it.
    models = {m for m in subclasses(pydantic.BaseModel) if m.__module__.startswith("zero_rename")}
    assert len(models) > 20, models
    for model in models:
        model.model_rebuild(force=True)


first_uses()
assert "PYDANTIC_DISABLE_PLUGINS" not in os.environ


class UsersModel(pydantic.BaseModel):
    value: int
"""


def test_worker_imports_leave_a_users_process_collector_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Outside Spark's workers nothing is frozen, and a collector the caller
    paused stays paused; inside the scope it is paused."""
    import gc

    from zero_rename.spark import worker_imports

    monkeypatch.delenv("SPARK_PYTHON_RUNTIME", raising=False)
    frozen = gc.get_freeze_count()
    try:
        with worker_imports():
            assert not gc.isenabled()
        assert gc.isenabled() and gc.get_freeze_count() == frozen
        gc.disable()
        with worker_imports(), worker_imports():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_worker_modules_build_their_models_without_plugins_and_leave_them_to_the_rest(
    tmp_path: pathlib.Path,
) -> None:
    """Where Spark's own lookup registered the format (no register(spark), no
    worker environment), a fresh worker importing the write's or the read's
    module, or PyIceberg for a job with Iceberg, looks up no pydantic plugin
    (about 65 ms of CPU a worker, with spark-core's jar on the path) and runs
    no collector pass, and neither does building the committer's models on
    their first use in one of the format's steps; a model built after them in
    the same process gets the plugins installed, and the collector runs again."""
    (tmp_path / "probe_plugin.py").write_text(PLUGIN_PROBE)
    info = tmp_path / "probe_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pydantic]\nprobe = probe_plugin:plugin\n")
    seen = tmp_path / "seen.txt"
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    env["PROBE_SEEN"] = str(seen)
    env["SPARK_PYTHON_RUNTIME"] = "PYTHON_WORKER"  # as Spark's daemon gives its workers
    subprocess.run([sys.executable, "-c", IMPORTS_AS_A_WORKER], env=env, check=True)
    assert seen.read_text().split() == ["__main__.UsersModel"]
