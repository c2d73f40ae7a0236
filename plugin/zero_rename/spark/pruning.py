"""Partition pruning for the reader: skip files whose partition values no filter row can pass.

Spark hands a Python data source the query's filters through
``DataSourceReader.pushFilters`` when ``spark.sql.python.filterPushdown.enabled``
is on. The reader uses the filters on partition columns to drop whole files and
still returns every filter to Spark, which applies them to the rows it reads:
pruning only has to be conservative (never drop a file a row of which could
pass), not exact. A filter this module cannot decide for a file keeps the file.

Filters follow SQL's three-valued logic: a comparison with a null partition
value is unknown, and a row whose filter is unknown is not returned, exactly as
for false; ``Not`` of unknown stays unknown.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Mapping, Sequence
from datetime import date
from types import FrameType
from typing import Any

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from pyspark.sql.types import DataType, DateType, DoubleType, IntegerType, LongType, StringType

# Spark refuses a reader that implements pushFilters while
# spark.sql.python.filterPushdown.enabled is off (DATA_SOURCE_PUSHDOWN_DISABLED),
# and tells the data source nothing of the setting; it calls pushFilters only
# from this planning worker. The reader with pushFilters is given to it alone.
_PUSHDOWN_WORKER = "data_source_pushdown_filters.py"

_OPS = {"==": operator.eq, ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
UNKNOWN = object()  # the filter cannot be decided here: keep the file
Values = Mapping[str, Any]


def called_for_pushdown(depth: int = 12) -> bool:
    """Whether Spark's filter pushdown worker is the one asking for a reader."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(depth):
        if frame is None:
            return False
        if frame.f_code.co_filename.endswith(_PUSHDOWN_WORKER):
            return True
        frame = frame.f_back
    return False


def typed_value(text: str | None, spark_type: DataType) -> Any:
    """A directory's value as the filter's literals are typed, or UNKNOWN."""
    if text is None:
        return None
    try:
        if isinstance(spark_type, StringType):
            return text
        if isinstance(spark_type, IntegerType | LongType):
            return int(text)
        if isinstance(spark_type, DoubleType):
            return float(text)
        if isinstance(spark_type, DateType):
            return date.fromisoformat(text)
    except ValueError:
        pass
    # A user-given type this module does not parse (timestamp, decimal...): undecided.
    return UNKNOWN


def evaluate(flt: Filter, values: Values) -> Any:
    """True, False, None (SQL null) or UNKNOWN, for a file with these partition values."""
    if isinstance(flt, Not):
        inner = evaluate(flt.child, values)
        return inner if inner is None or inner is UNKNOWN else not inner
    # Every filter but Not (handled above) names its column by ``attribute``.
    attribute: tuple[str, ...] = flt.attribute  # type: ignore[attr-defined]
    column = attribute[0] if len(attribute) == 1 else None
    if column is None or column not in values:
        return UNKNOWN  # a data column, or a nested field: for Spark to apply
    value = values[column]
    if value is UNKNOWN:
        return UNKNOWN
    if isinstance(flt, IsNull):
        return value is None
    if isinstance(flt, IsNotNull):
        return value is not None
    if isinstance(flt, EqualNullSafe):
        return (
            _compare(value, flt.value, "==")
            if None not in (value, flt.value)
            else value is flt.value
        )
    if value is None:
        return None
    try:
        return _decide(flt, value)
    except TypeError:
        return UNKNOWN  # a literal of another type than the column's


def _decide(flt: Filter, value: Any) -> Any:
    if isinstance(flt, EqualTo):
        return None if flt.value is None else _compare(value, flt.value, "==")
    if isinstance(flt, In):
        literals = [v for v in flt.value if v is not None]
        if any(_compare(value, v, "==") is True for v in literals):
            return True
        return None if len(literals) < len(flt.value) else False
    for kind, op in (
        (GreaterThan, ">"),
        (GreaterThanOrEqual, ">="),
        (LessThan, "<"),
        (LessThanOrEqual, "<="),
    ):
        if isinstance(flt, kind):
            return None if flt.value is None else _compare(value, flt.value, op)
    if isinstance(flt, StringStartsWith | StringEndsWith | StringContains):
        if not isinstance(value, str) or not isinstance(flt.value, str):
            return UNKNOWN
        if isinstance(flt, StringStartsWith):
            return value.startswith(flt.value)
        if isinstance(flt, StringEndsWith):
            return value.endswith(flt.value)
        return flt.value in value
    return UNKNOWN


def _compare(left: Any, right: Any, op: str) -> Any:
    numbers = (int, float)
    same = (
        isinstance(left, numbers)
        and isinstance(right, numbers)
        and not isinstance(left, bool)
        and not isinstance(right, bool)
    ) or type(left) is type(right)
    if not same:
        raise TypeError(f"{type(left).__name__} against {type(right).__name__}")
    return _OPS[op](left, right)


def may_match(filters: Sequence[Filter], values: Values) -> bool:
    """False only when some filter is certainly false or null for every row of the file."""
    for flt in filters:
        outcome = evaluate(flt, values)
        if outcome is False or outcome is None:
            return False
    return True
