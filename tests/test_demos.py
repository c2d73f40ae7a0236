"""The demos (``demo/``, not installed): the protocol demo's job, and the demos
finding the repository's DAGs and definitions wherever they are started from.

``make demo`` and ``make demo-dagster`` themselves are not run here: the daily
DAG and the Dagster asset they run are tested in tests/airflow and tests/dagster.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from demo import airflow_dag, common, dagster_asset, protocol, stack
from tests.table_jobs import table_job
from zero_rename.cli.main import build_parser
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import StoreConfig

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.s3
def test_protocol_demo_commits_only_the_winning_attempts(
    committer: Committer, store_config: StoreConfig
) -> None:
    said: list[str] = []
    ran = protocol.run_job(committer, store_config, said.append)
    # Nine uploads pending and none visible before job commit; nine files after,
    # none of them from the failed attempt, whose files were aborted.
    assert (ran.pending_before_commit, ran.visible_before_commit) == (9, 0)
    assert len(ran.files) == 9
    success = committer.read_success()
    assert success is not None and success.job_id == ran.job_id
    assert success.committer == "magic"
    assert success.metrics["committer_rows_committed"] == 900
    assert list(success.partitions) == ["dt=2024-01-01", "dt=2024-01-02", "dt=2024-01-03"]
    assert sorted(path.split("/")[0] for path, _ in ran.files) == sorted(success.partitions * 3)
    assert committer.pending_uploads() == []
    assert any("before job commit: 9 pending upload(s), 0 visible file(s)" in line for line in said)


@pytest.mark.s3
def test_protocol_demo_shows_the_output_through_the_command(
    committer: Committer, store_config: StoreConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    protocol.run_job(committer, store_config, lambda line: None)
    assert protocol.show(committer.dest.url) == 0
    out = capsys.readouterr().out
    assert f"$ zero-rename validate {committer.dest.url}" in out
    assert "ok: " in out and "sizes and ETags as recorded" in out


@pytest.mark.s3
def test_make_demo_core_runs_on_its_own_server() -> None:
    """What ``make demo-core`` runs: on a server of its own, which it stops."""
    ran = subprocess.run(
        [sys.executable, "-m", "demo.protocol"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    assert "before job commit: 9 pending upload(s), 0 visible file(s)" in ran.stdout
    assert "rows" in ran.stdout and "900" in ran.stdout
    assert ran.stdout.rstrip().endswith("S3 server stopped")


@pytest.mark.unit
def test_demos_find_the_repository_wherever_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The DAGs and definitions are found from the demo's own place, not the
    current directory; a wrong one is refused before anything starts."""
    monkeypatch.chdir(tmp_path)
    assert (airflow_dag.REPOSITORY / "dags" / f"{airflow_dag.DAG_ID}.py").is_file()
    assert (dagster_asset.REPOSITORY / "dagster_defs" / "definitions.py").is_file()
    with pytest.raises(SystemExit) as refused:
        airflow_dag.main(["--dags", str(tmp_path)])
    assert refused.value.code == 2
    with pytest.raises(SystemExit) as refused:
        dagster_asset.main(["--defs", str(tmp_path / "nothing.py")])
    assert refused.value.code == 2


@pytest.mark.unit
def test_the_installed_package_holds_no_demo() -> None:
    """Demos live beside dags/, outside the package: the command has none."""
    assert not list((ROOT / "plugin" / "zero_rename").rglob("demo*.py"))
    commands = next(
        a.choices for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    )
    assert "s3" in commands and "demo" not in commands


@pytest.mark.s3
def test_the_demos_read_a_published_table_back_through_the_formats_reader(
    committer: Committer, s3_server: Any
) -> None:
    """What ``--table-format delta`` prints after the run: the table as deltalake reads it."""
    assert common.table_report(committer.dest.url, s3_server) == [
        f"no job at {committer.dest.url} was published to a table format"
    ]
    table_job(committer, {"2024-01-01": [1, 2, 3], "2024-01-02": [4]}, table_format="delta")
    last = table_job(committer, {"2024-01-02": [5, 6]}, "replace", table_format="delta")
    version = last.table_commit.id  # type: ignore[union-attr]
    assert common.table_report(committer.dest.url, s3_server) == [
        f"delta table {committer.dest.url}, read through deltalake (version {version}; the "
        f"last job's commit: version {version}):",
        "  dt=2024-01-01: 3 row(s)",
        "  dt=2024-01-02: 2 row(s)",
    ]
    args = airflow_dag.day_parser(airflow_dag.__doc__ or "").parse_args(["--table-format", "delta"])
    assert args.table_format == "delta"


@pytest.mark.s3
def test_the_stack_demos_store_in_trouble_leaves_a_commit_that_cannot_finish(
    committer: Committer, store_config: StoreConfig
) -> None:
    """What ``make stack-demo`` leaves for the page's "Roll back…": a job past its
    point of no return, nothing of it visible, its upload gone; a rollback without
    force takes it back."""
    job_id = stack.unfinishable_commit(committer.dest.url, "2024-01-07", store_config)
    record = committer.job(job_id)
    assert record.state == "committing" and stack.committing_jobs(committer.dest.url) == [job_id]
    assert committer.pending_uploads(job_id) == [] and committer.read_success() is None
    committer.rollback_job(job_id, reason="rolled back by the test")
    assert committer.job(job_id).state == "aborted"


def test_the_dagster_demo_keeps_stderr_out_of_its_summary(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """What a child process (Spark's JVM) and Python write to standard error goes to
    the log while the materialization runs, and back to the terminal after."""
    log = tmp_path / "materialize.log"
    with dagster_asset.stderr_to(log):
        os.write(2, b"WARNING: Using incubator modules\n")
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('[Stage 0:>]\\n')"])
        print("a summary line")
    print("after", file=sys.stderr)
    out, err = capfd.readouterr()
    assert out == "a summary line\n" and err == "after\n"
    assert log.read_text() == "WARNING: Using incubator modules\n[Stage 0:>]\n"
    assert dagster_asset.tail(log, 1) == "[Stage 0:>]"
