"""The layers import one way: core <- read <- spark <- airflow, dagster; the CLI on the core.

Every module of the package belongs to a layer (a subpackage, or a top-level
module), each layer imports only the package's layers below it, and none
imports an engine or orchestrator it does not drive.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parent.parent / "plugin"
PACKAGE = PLUGIN / "zero_rename"

# layer -> the package's other layers it may import ("__init__": the package itself)
LOWER: dict[str, tuple[str, ...]] = {
    "errors": (),
    "formatting": (),
    "embedded_s3": ("errors",),
    "core": ("errors",),
    # The Arrow reader, for pandas, DuckDB and Polars users.
    "read": ("core", "errors"),
    "__init__": ("read",),  # read_table and read_dataset, imported on first use
    "spark": ("read", "core", "errors"),
    "cli": ("__init__", "read", "core", "errors", "formatting", "embedded_s3"),
    # Two orchestrator front ends side by side; neither knows the other.
    "airflow": ("spark", "read", "core", "errors", "formatting"),
    "dagster": ("spark", "read", "core", "errors"),
}
# The engines and orchestrators, and the layers that may import each.
DRIVEN: dict[str, tuple[str, ...]] = {
    "pyarrow": ("read", "spark", "airflow", "dagster"),
    "pyspark": ("spark", "airflow", "dagster"),
    "airflow": ("airflow",),
    "dagster": ("dagster",),
}


def imports_of(path: Path) -> list[str]:
    """Every module ``path`` imports, at any depth (imports inside functions too);
    ``from zero_rename import x`` counts as ``zero_rename.x``."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "zero_rename":
                names += [f"zero_rename.{a.name}" for a in node.names]
            else:
                names.append(node.module)
    return names


def layer_of(name: str) -> str | None:
    """The package's layer a module name is in; None outside the package."""
    parts = name.split(".")
    if parts[0] != "zero_rename":
        return None
    if len(parts) == 1:
        return "__init__"
    return parts[1] if parts[1] in LOWER else "__init__"  # else a name the package defines


def modules() -> dict[str, list[Path]]:
    """Every source file of the package, by layer."""
    found: dict[str, list[Path]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        found.setdefault(parts[0] if len(parts) > 1 else path.stem, []).append(path)
    return found


def allowed(layer: str, name: str) -> bool:
    """Whether a module of ``layer`` may import the module ``name``."""
    inner, root = layer_of(name), name.split(".")[0]
    if inner is not None:
        return inner == layer or inner in LOWER[layer]
    return root not in DRIVEN or layer in DRIVEN[root]


def violations(layer: str, paths: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in paths
        for name in imports_of(path)
        if not allowed(layer, name)
    ]


def test_every_module_belongs_to_a_layer() -> None:
    assert sorted(set(modules()) - set(LOWER)) == []


@pytest.mark.parametrize("layer", sorted(LOWER))
def test_layer_imports_go_one_way(layer: str) -> None:
    assert violations(layer, modules().get(layer, [])) == []


def test_the_spark_entry_package_imports_only_the_spark_layer() -> None:
    names = [
        n
        for p in sorted((PLUGIN / "pyspark_zero_rename").rglob("*.py"))
        for n in imports_of(p)
        if layer_of(n) is not None
    ]
    assert names and {layer_of(n) for n in names} == {"spark"}


def test_check_catches_wrong_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "cli").mkdir()
    (tmp_path / "core" / "bad.py").write_text(
        "from zero_rename.airflow import hooks\ndef later():\n    import pyarrow\n"
    )
    (tmp_path / "cli" / "bad.py").write_text("from zero_rename import spark\n")
    (tmp_path / "stray.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    found = modules()
    assert violations("core", found["core"]) == [
        "core/bad.py imports zero_rename.airflow",
        "core/bad.py imports pyarrow",
    ]
    assert violations("cli", found["cli"]) == ["cli/bad.py imports zero_rename.spark"]
    assert sorted(set(found) - set(LOWER)) == ["stray"]


def test_core_imports_without_spark_or_airflow() -> None:
    code = (
        "import sys, zero_rename.core.committer, zero_rename.core.commit;"
        "bad=[m for m in sys.modules if m.split('.')[0] in ('pyspark','airflow','dagster')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
