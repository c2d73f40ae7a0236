"""Destinations, partition directories, file names and options: pure functions."""

from __future__ import annotations

import pytest

from zero_rename.core.data.layout import (
    Destination,
    check_data_key,
    data_file_name,
    escape_partition_value,
    parse_partition_dir,
    partition_dir,
    unescape_partition_value,
)
from zero_rename.core.data.options import MIB, parse_options
from zero_rename.errors import ConfigError

JOB = "0b7f3c1e-5d2a-4c8e-9f1a-2b3c4d5e6f70"


@pytest.mark.parametrize(
    "url,bucket,prefix",
    [
        ("s3://bucket/table", "bucket", "table"),
        ("s3a://bucket/a/b/", "bucket", "a/b"),
        ("S3://bucket/t", "bucket", "t"),
    ],
)
def test_destination_parses(url: str, bucket: str, prefix: str) -> None:
    d = Destination.parse(url)
    assert (d.bucket, d.prefix, d.dir) == (bucket, prefix, prefix + "/")


@pytest.mark.parametrize(
    "url,message",
    [
        ("s3://bucket", "bucket root"),
        ("s3://bucket/", "bucket root"),
        ("hdfs://x/y", "s3:// or s3a://"),
        ("s3://B_ad/t", "invalid bucket"),
        ("s3://bucket/a/../b", "unsafe"),
        ("s3://bucket/_zero_rename/x", "unsafe"),
        ("s3://bucket//a//b", "empty or unsafe path element ''"),
        ("s3://bucket/events#x", "fragment"),
        ("s3://bucket/events?v=1", "query"),
        ("s3://bucket/ev\tents", "control character"),
    ],
)
def test_destination_refuses(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Destination.parse(url)


def test_adjacent_destinations_never_share_a_prefix() -> None:
    assert not Destination.parse("s3://bkt/out/ds10").dir.startswith(
        Destination.parse("s3://bkt/out/ds1").dir
    )


@pytest.mark.parametrize(
    "value,escaped",
    [
        ("2024-01-01", "2024-01-01"),
        ("a/b", "a%2Fb"),
        ("a=b", "a%3Db"),
        ("100%", "100%25"),
        ("12:30", "12%3A30"),
        ("new york", "new york"),
        ("zürich", "zürich"),
        ("..", ".."),
        (None, "__HIVE_DEFAULT_PARTITION__"),
        ("", "__HIVE_DEFAULT_PARTITION__"),
    ],
)
def test_partition_values_escape_as_spark_does(value: str | None, escaped: str) -> None:
    assert escape_partition_value(value) == escaped
    assert unescape_partition_value(escaped) == (value or None)


def test_partition_dir_round_trip_stays_one_level_per_column() -> None:
    values = {"dt": "2024/01/01", "region": "../../etc"}
    relative = partition_dir(("dt", "region"), values)
    assert relative == "dt=2024%2F01%2F01/region=..%2F..%2Fetc/"
    assert relative.count("/") == 2
    assert parse_partition_dir(("dt", "region"), relative + "part-0.parquet") == values


def test_partition_dir_needs_exactly_the_columns() -> None:
    with pytest.raises(ConfigError, match="do not match"):
        partition_dir(("dt",), {"dt": "x", "other": "y"})
    with pytest.raises(ConfigError, match="string or None"):
        partition_dir(("dt",), {"dt": 5})  # type: ignore[dict-item]


def test_file_names_carry_the_job_id() -> None:
    assert data_file_name("00003", JOB, 0, ".parquet") == f"part-00003-{JOB}.c000.parquet"
    with pytest.raises(ConfigError):
        data_file_name("00003", JOB, 0, "/../x")
    with pytest.raises(ConfigError):
        data_file_name("../3", JOB, 0, ".parquet")


def test_data_key_checks() -> None:
    d = Destination.parse("s3://bkt/t")
    good = f"t/dt=1/part-0-{JOB}.c000.parquet"
    assert check_data_key(d, JOB, good) is None
    assert "outside" in check_data_key(d, JOB, f"t2/part-{JOB}")  # type: ignore[operator]
    assert "job id" in check_data_key(d, JOB, "t/part-0.parquet")  # type: ignore[operator]
    assert "hidden" in check_data_key(d, JOB, f"t/_tmp/part-{JOB}")  # type: ignore[operator]
    assert "'..'" in check_data_key(d, JOB, f"t/../part-{JOB}")  # type: ignore[operator]


def test_options_parse_strings_and_defaults() -> None:
    o = parse_options(
        {
            "partition_columns": "dt, region",
            "part_size": str(16 * MIB),
            "committer": "staging",
            "threads": "8",
            "verify_uploads": "false",
        }
    )
    assert o.partition_columns == ("dt", "region")
    assert (o.part_size, o.threads, o.verify_uploads) == (16 * MIB, 8, False)
    assert o.mode_name == "partitioned"
    defaults = parse_options()
    assert (defaults.committer, defaults.conflict_mode, defaults.threads) == ("magic", "fail", 64)


@pytest.mark.parametrize(
    "options,message",
    [
        ({"conflict": "replace"}, "unknown option.*'conflict'"),
        ({"conflict_mode": "merge"}, "conflict_mode"),
        ({"committer": "directory"}, "committer"),
        ({"part_size": 1024}, "part_size"),
        ({"threads": 0}, "threads"),
        ({"partition_columns": "dt,dt"}, "twice"),
        ({"partition_columns": "a/b"}, "may not contain"),
    ],
)
def test_options_refuse_what_they_cannot_use(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_options(options)
