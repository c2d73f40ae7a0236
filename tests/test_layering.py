"""The layers import one way: core <- read, spark <- airflow, dagster; the CLI on the core."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "plugin" / "zero_rename"

# layer -> module prefixes it may never import
FORBIDDEN = {
    "core": ("pyspark", "pyarrow", "airflow", "dagster", "zero_rename.spark",
             "zero_rename.airflow", "zero_rename.dagster", "zero_rename.cli", "zero_rename.read"),
    "spark": ("airflow", "dagster", "zero_rename.airflow", "zero_rename.dagster",
              "zero_rename.cli"),
    "cli": ("pyspark", "airflow", "dagster", "zero_rename.spark", "zero_rename.airflow",
            "zero_rename.dagster"),
    # The Arrow reader, for pandas, DuckDB and Polars users: no Spark, no Airflow.
    "read": ("pyspark", "airflow", "dagster", "zero_rename.spark", "zero_rename.airflow",
             "zero_rename.dagster", "zero_rename.cli"),
    # Two orchestrator front ends side by side; neither knows the other.
    "airflow": ("dagster", "zero_rename.dagster"),
    "dagster": ("airflow", "zero_rename.airflow"),
}


def imports_of(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def violations(layer: str) -> list[str]:
    found = []
    paths = (sorted((PACKAGE / layer).rglob("*.py")) if (PACKAGE / layer).is_dir()
             else [PACKAGE / f"{layer}.py"])
    for path in paths:
        for name in imports_of(path):
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN[layer]):
                found.append(f"{path.relative_to(PACKAGE)} imports {name}")
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_go_one_way(layer: str) -> None:
    assert violations(layer) == []


def test_check_catches_a_wrong_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "bad.py").write_text("from zero_rename.airflow import hooks\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    assert violations("core") == ["core/bad.py imports zero_rename.airflow"]


def test_core_imports_without_spark_or_airflow() -> None:
    import subprocess
    import sys

    code = ("import sys, zero_rename.core.committer, zero_rename.core.commit;"
            "bad=[m for m in sys.modules if m.split('.')[0] in ('pyspark','airflow','dagster')];"
            "print(bad); sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
