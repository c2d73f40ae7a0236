"""Apache Iceberg, as the registry knows it: the ``iceberg_catalog`` and
``iceberg_table`` job options; the format itself is :mod:`.iceberg`."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, field_validator

from zero_rename.core.tables.plugin import FormatOption, FormatPlugin

# An Iceberg table identifier: namespace.table, each a SQL-safe name.
_ICEBERG_TABLE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}(\.[A-Za-z_][A-Za-z0-9_]{0,127})+")
_CATALOG_RE = re.compile(r"[A-Za-z0-9_\-]{1,64}")


class IcebergOptions(BaseModel):
    # The catalog's name as PyIceberg users configure it (.pyiceberg.yaml,
    # PYICEBERG_CATALOG__<NAME>__...); empty: the embedded SQL catalog on SQLite.
    iceberg_catalog: str = ""
    # namespace.table; empty: derived from the destination.
    iceberg_table: str = ""

    @field_validator("iceberg_catalog")
    @classmethod
    def _check_catalog(cls, value: str) -> str:
        if value and not _CATALOG_RE.fullmatch(value):
            raise ValueError(
                f"iceberg_catalog {value[:80]!r} must be 1-64 letters, digits, '-', '_'"
            )
        return value

    @field_validator("iceberg_table")
    @classmethod
    def _check_table(cls, value: str) -> str:
        if value and not _ICEBERG_TABLE_RE.fullmatch(value):
            raise ValueError(
                f"iceberg_table {value[:80]!r} must be namespace.table (letters, digits, '_')"
            )
        return value


def _describe(options: Any) -> str:
    return (
        f"iceberg (catalog {options.iceberg_catalog or 'embedded'}, "
        f"table {options.iceberg_table or 'from the destination'})"
    )


PLUGIN = FormatPlugin(
    name="iceberg",
    label="Iceberg",
    folder="_iceberg",
    implementation="zero_rename.core.tables.iceberg:IcebergFormat",
    commit_word="snapshot",
    options=IcebergOptions,
    option_help={
        "iceberg_catalog": FormatOption(
            "the PyIceberg catalog's name (.pyiceberg.yaml, PYICEBERG_CATALOG__<NAME>__...); "
            "empty: the embedded SQL catalog.",
            example="glue",
            metavar="NAME",
            flag_help="PyIceberg catalog name (default: the embedded one)",
        ),
        "iceberg_table": FormatOption(
            "namespace.table; empty: derived from the destination.",
            example="analytics.daily_events",
            metavar="NS.TABLE",
            flag_help="Iceberg table (default: derived from DEST)",
        ),
    },
    describe=_describe,
)
