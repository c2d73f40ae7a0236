"""The table formats' registry: each format declares its name, folder, options and
how people name them; the job options, the layout, the command line and Airflow's
provider info read them from there. No S3, no format library."""

from __future__ import annotations

import subprocess
import sys

import pytest

from zero_rename.core.data.model import TableCommit
from zero_rename.core.data.options import JobOptions, parse_options
from zero_rename.core.tables import registry
from zero_rename.errors import ConfigError

pytestmark = pytest.mark.unit


def test_the_formats_declare_themselves() -> None:
    assert registry.format_names() == ("iceberg", "delta")
    assert registry.folders() == {"iceberg": "_iceberg", "delta": "_delta_log"}
    assert registry.format_plugin("none") is None
    assert list(registry.option_help()) == ["iceberg_catalog", "iceberg_table"]


def test_a_formats_options_join_the_job_options_after_the_cores() -> None:
    fields = list(JobOptions.model_fields)
    assert fields[fields.index("table_format") + 1 :] == ["iceberg_catalog", "iceberg_table"]
    options = parse_options({"table_format": "iceberg", "iceberg_table": "ns.t"})
    iceberg = registry.table_formats()["iceberg"]
    assert iceberg.options_of(options).iceberg_table == "ns.t"
    assert iceberg.described(options) == "iceberg (catalog embedded, table ns.t)"
    assert registry.table_formats()["delta"].described(options) == "delta"
    with pytest.raises(ConfigError, match="'none', 'iceberg' or 'delta'"):
        parse_options({"table_format": "hudi"})
    with pytest.raises(ConfigError, match="must be namespace.table"):
        parse_options({"iceberg_table": "t"})


def test_a_commit_is_named_as_its_format_names_it() -> None:
    assert TableCommit(format="iceberg", table="t", id="8").version == "snapshot 8"
    assert TableCommit(format="delta", table="t", id="3").version == "version 3"


def test_the_registry_imports_no_format_library() -> None:
    code = (
        "import sys; from zero_rename.core.data.options import parse_options;"
        "from zero_rename.core.tables.registry import table_formats; table_formats();"
        "parse_options({'table_format': 'iceberg'});"
        "bad = [m for m in sys.modules"
        " if m.split('.')[0] in ('pyiceberg', 'deltalake', 'pyarrow')];"
        "sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
