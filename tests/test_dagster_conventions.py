"""Dagster's conventions: the standard metadata keys and check results as the package
forms them, the component's definitions, and the component in dg's own runs
(listed, scaffolded into a project, loaded by ``dg check defs``).

Here rather than in tests/dagster/, whose tests share the Spark session's worker:
nothing here starts Spark, and dg's processes run beside the Spark tests.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dagster import AssetCheckSeverity

from zero_rename.core import JobRecord, JobSummary, OutputCheck, TableCommit, parse_options
from zero_rename.core.data.model import OutputProblem
from zero_rename.dagster import DailyPartitionedAssetComponent, checks, standard
from zero_rename.errors import ValidationError

REPOSITORY = Path(__file__).resolve().parent.parent
COMPONENT = "zero_rename.dagster.DailyPartitionedAssetComponent"
DG_SECONDS = 180


def test_the_files_schema_becomes_dagsters_column_schema() -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("amount", pa.decimal128(12, 2)),
            ("dt", pa.date32()),
        ]
    )
    encoded = base64.b64encode(schema.serialize().to_pybytes()).decode()
    columns = standard.column_schema(encoded, ("dt",)).columns
    assert [(c.name, c.type, c.constraints.nullable) for c in columns] == [
        ("id", "int64", False),
        ("amount", "decimal128(12, 2)", True),
        ("dt", "date32[day]", True),
    ]
    assert [c.description for c in columns] == [None, None, "partition column"]
    assert standard.column_schema("") is None  # a writer that recorded none


def test_only_an_iceberg_table_has_a_name() -> None:
    def record(table: TableCommit | None, **options: str) -> JobRecord:
        return JobRecord(
            job_id="j", destination="s3://b/t", state="committed", options=parse_options(options)
        ).model_copy(update={"table_commit": table})

    iceberg = TableCommit(format="iceberg", table="analytics.events", id="7")
    assert standard.table_name(record(iceberg)) == "analytics.events"
    assert standard.table_name(record(iceberg, iceberg_catalog="glue")) == "glue.analytics.events"
    assert (
        standard.table_name(record(TableCommit(format="delta", table="s3://b/t", id="3"))) is None
    )
    assert standard.table_name(record(None)) is None


def test_check_results_say_what_the_steps_reported() -> None:
    problem = OutputProblem(kind="etag", path="dt=1/f.parquet", detail="rewritten")
    invalid = OutputCheck(outcome="invalid", files=2, problem_count=1, problems=(problem,))
    failed = checks.output_result("j", invalid)
    assert (failed.passed, failed.severity) == (False, AssetCheckSeverity.ERROR)
    assert failed.metadata["first_problems"].value == [problem.to_json()]
    assert "The job stays committed" in (failed.description or "")
    later = checks.output_result("j", OutputCheck(outcome="superseded", superseded_by="k"))
    assert later.passed and "job k" in (later.description or "")

    committing = JobSummary(job_id="j", destination="s3://b/t", state="committing", files=3)
    assert "before its commit went ahead" in (
        checks.validation_passed(committing).description or ""
    )
    error = ValidationError(
        "job j cannot commit: task 1 has 2 manifests", ["task 1 has 2 manifests"]
    )
    refused = checks.validation_failed("j", error)
    assert not refused.passed and refused.metadata["problems"].value == 1


def component(**attributes: Any) -> DailyPartitionedAssetComponent:
    values = {
        "asset_key": "events/daily",
        "destination": "s3://bucket/events",
        "start_date": "2024-01-01",
        "frame": "zero_rename.spark.sample.daily_rows",
        **attributes,
    }
    with warnings.catch_warnings():
        # Dagster's YAML reader calls pydantic's parse_obj_as, deprecated since pydantic 2.
        warnings.simplefilter("ignore", DeprecationWarning)
        return DailyPartitionedAssetComponent.resolve_from_yaml(json.dumps(values))


def test_the_component_builds_the_asset_its_blocking_checks_job_and_schedule() -> None:
    from dagster import AssetKey, build_defs_for_component

    defs = build_defs_for_component(component(table_format="delta"))
    asset = defs.resolve_assets_def(AssetKey(["events", "daily"]))
    assert asset.key == AssetKey(["events", "daily"])
    checks = defs.resolve_asset_graph().asset_check_keys
    assert {c.name for c in checks} == {"manifests_valid", "output_valid"}
    assert all(s.blocking for s in asset.check_specs)
    spec = asset.specs_by_key[asset.key]
    assert spec.metadata["dagster/uri"] == "s3://bucket/events"
    assert set(spec.kinds) == {"spark", "s3", "delta"}
    schedule = defs.resolve_schedule_def("events__daily_job_schedule")
    assert schedule.cron_schedule == "0 1 * * *"
    assert defs.resolve_job_def("events__daily_job") is not None

    # Without the output check or the schedule; a wrong option refused at load.
    bare = build_defs_for_component(component(validate_output=False, schedule=None))
    assert {c.name for c in bare.resolve_asset_graph().asset_check_keys} == {"manifests_valid"}
    assert not bare.schedules
    with pytest.raises(Exception, match="table_format"):
        build_defs_for_component(component(table_format="parquet"))


def dg(*args: str, cwd: Path, home: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),  # its dagster.yaml turns telemetry off
        "VIRTUAL_ENV": sys.prefix,  # the venv dg runs in is the project's
        "COLUMNS": "200",
    }
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "dg"), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finished(proc: subprocess.Popen[str]) -> str:
    out, _ = proc.communicate(timeout=DG_SECONDS)
    assert proc.returncode == 0, out[-3000:]
    return out


# dg's own processes, three of them: under make test-extended, with `dg dev`.
@pytest.mark.dagster
@pytest.mark.extended
def test_dg_lists_the_component_scaffolds_its_defs_yaml_and_loads_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    # A dg project of one package, as `dg scaffold project` lays it out.
    project = tmp_path / "project"
    (project / "scaffolded" / "defs").mkdir(parents=True)
    (project / "dg.toml").write_text(
        'directory_type = "project"\n[project]\nroot_module = "scaffolded"\n'
    )
    (project / "scaffolded" / "__init__.py").write_text("")
    (project / "scaffolded" / "defs" / "__init__.py").write_text("")
    (project / "scaffolded" / "definitions.py").write_text(
        textwrap.dedent("""\
            from pathlib import Path

            from dagster import load_from_defs_folder

            defs = load_from_defs_folder(path_within_project=Path(__file__).parent)
            """)
    )
    params = {"destination": "s3://bucket/orders", "frame": "zero_rename.spark.sample.daily_rows"}
    listing = dg(
        "list", "components", "--json", "--package", "zero_rename", cwd=tmp_path, home=home
    )
    scaffold = dg(
        *("scaffold", "defs", COMPONENT, "orders", "--json-params", json.dumps(params)),
        cwd=project,
        home=home,
    )

    listed = json.loads(finished(listing).strip().splitlines()[-1])
    assert [item["key"] for item in listed["items"]] == [COMPONENT]
    finished(scaffold)
    written = (project / "scaffolded" / "defs" / "orders" / "defs.yaml").read_text()
    assert f"type: {COMPONENT}" in written and "destination: s3://bucket/orders" in written
    assert "asset_key: orders" in written

    # dg validates the file against the component's schema and loads the definitions.
    checked = finished(dg("check", "defs", cwd=project, home=home))
    assert "All definitions loaded successfully" in checked
