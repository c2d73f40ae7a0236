"""Partition pruning decisions, without Spark or S3: never drop a file a row of which could pass."""

from __future__ import annotations

from datetime import date, datetime

import pytest
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from pyspark.sql.types import DateType, IntegerType, StringType, TimestampType

from zero_rename.spark.pruning import UNKNOWN, called_for_pushdown, may_match, typed_value

pytestmark = pytest.mark.unit


def files(dt: str | None, shard: str | None = "1") -> dict[str, object]:
    return {
        "dt": typed_value(dt, DateType()),
        "shard": typed_value(shard, IntegerType()),
        "name": typed_value("eu-west", StringType()),
    }


@pytest.mark.parametrize(
    ("flt", "keep"),
    [
        (EqualTo(("dt",), date(2026, 11, 21)), True),
        (EqualTo(("dt",), date(2026, 11, 20)), False),
        (GreaterThan(("dt",), date(2026, 11, 21)), False),
        (GreaterThanOrEqual(("dt",), date(2026, 11, 21)), True),
        (LessThan(("shard",), 2), True),
        (LessThan(("shard",), 1), False),
        (In(("shard",), (0, 2)), False),
        (In(("shard",), (0, 1)), True),
        (Not(EqualTo(("shard",), 1)), False),
        (Not(EqualTo(("shard",), 0)), True),
        (IsNull(("dt",)), False),
        (IsNotNull(("dt",)), True),
        (EqualNullSafe(("shard",), None), False),
        (StringStartsWith(("name",), "eu-"), True),
        (StringEndsWith(("name",), "east"), False),
        (StringContains(("name",), "west"), True),
        # A data column, a nested field, a literal of another type: Spark decides.
        (EqualTo(("amount",), 3.0), True),
        (EqualTo(("dt", "x"), 1), True),
        (EqualTo(("dt",), "2026-11-20"), True),
        (EqualTo(("dt",), datetime(2026, 11, 20)), True),
        (StringStartsWith(("shard",), "2"), True),
    ],
)
def test_a_filter_drops_only_files_it_rules_out(flt: object, keep: bool) -> None:
    assert may_match([flt], files("2026-11-21")) is keep


def test_a_null_partition_value_follows_three_valued_logic() -> None:
    null_dt = files(None)
    # dt = x, dt > x, not (dt = x), dt in (...) are all null for a null dt: no row passes.
    for flt in (
        EqualTo(("dt",), date(2026, 11, 21)),
        GreaterThan(("dt",), date(2026, 1, 1)),
        Not(EqualTo(("dt",), date(2026, 11, 21))),
        In(("dt",), (date(2026, 1, 1),)),
    ):
        assert not may_match([flt], null_dt)
    assert may_match([IsNull(("dt",))], null_dt)
    assert may_match([EqualNullSafe(("dt",), None)], null_dt)
    # shard in (0, null) is null for shard 1, true for shard 0.
    assert not may_match([In(("shard",), (0, None))], files("2026-11-21", "1"))
    assert may_match([In(("shard",), (0, None))], files("2026-11-21", "0"))


def test_all_filters_must_allow_the_file() -> None:
    both = [EqualTo(("dt",), date(2026, 11, 21)), EqualTo(("shard",), 0)]
    assert not may_match(both, files("2026-11-21", "1"))
    assert may_match(both, files("2026-11-21", "0"))


def test_values_the_type_does_not_parse_keep_the_file() -> None:
    assert typed_value("not-a-date", DateType()) is UNKNOWN
    assert typed_value("2026-11-21 10:00:00", TimestampType()) is UNKNOWN
    values = {"dt": UNKNOWN}
    assert may_match([EqualTo(("dt",), date(2026, 11, 21))], values)
    assert may_match([Not(IsNull(("dt",)))], values)


def test_only_the_pushdown_worker_gets_the_pruning_reader() -> None:
    assert called_for_pushdown() is False
    source = (
        "from zero_rename.spark.pruning import called_for_pushdown\nresult = called_for_pushdown()"
    )
    scope: dict[str, object] = {}
    exec(compile(source, "/x/pyspark/sql/worker/data_source_pushdown_filters.py", "exec"), scope)
    assert scope["result"] is True
