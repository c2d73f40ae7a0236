"""The layers import one way: core <- read <- spark <- airflow, dagster; the CLI on the core.

Every module of the package belongs to a layer (a subpackage, or a top-level
module), each layer imports only the package's layers below it, and none
imports an engine or orchestrator it does not drive. Inside the core, the
rooms do the same: s3 <- data <- protocol <- the public face (``core/*.py``);
the store imports neither the data nor the protocol, and the data knows of
the protocol only the job's states.
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
    # The typed values' pydantic configuration (frozen, built on first use).
    "frozen": (),
    "formatting": (),
    "embedded_s3": ("errors",),
    "core": ("errors", "frozen"),
    # The Arrow reader, for pandas, DuckDB and Polars users.
    "read": ("core", "errors"),
    "__init__": ("read",),  # read_table and read_dataset, imported on first use
    "spark": ("read", "core", "errors", "frozen"),
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
    # The OpenLineage client, through Airflow's provider only.
    "openlineage": ("airflow",),
    "dagster": ("dagster",),
}


# core room -> the rooms it may import ("face": core/__init__.py, committer.py, steps.py...)
ROOMS: dict[str, tuple[str, ...]] = {
    "s3": (),
    "data": ("s3",),
    "tables": ("data", "s3"),
    "protocol": ("tables", "data", "s3"),
    # Read-only views of a destination: they read through the protocol, and no step imports them.
    "views": ("protocol", "tables", "data", "s3"),
    "face": ("views", "protocol", "tables", "data", "s3"),
}
# The table formats' libraries, and the one room that may import them (on first use).
TABLE_LIBRARIES = ("pyarrow", "pyiceberg", "deltalake")
# Modules of a higher room a lower one may import, and why: a record carries the
# job's state, which the state machine's module defines; the job's options carry
# each table format's, which the formats' registry declares. Neither imports
# anything of the core (test_the_exceptions_import_nothing_of_the_core).
ROOM_EXCEPTIONS = {
    ("data", "zero_rename.core.protocol.states"),
    ("data", "zero_rename.core.tables.registry"),
}
# What the exceptions may import of the core: the registry, its formats' declarations.
DECLARATIONS = {"zero_rename.core.tables.plugin"}
CORE = PACKAGE / "core"


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
        if not allowed(layer, name) and not _table_library(path, name)
    ]


def _table_library(path: Path, name: str) -> bool:
    """A table format's library, imported by the core's tables room (and nowhere else
    in the core: test_the_core_rooms_import_one_way)."""
    return name.split(".")[0] in TABLE_LIBRARIES and "tables" in path.parts


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


# The layers above the core, which reach it only through its front door.
FRONT_ENDS = ("read", "spark", "cli", "airflow", "dagster")
# Names users import from the front door that no front end does (README.md, docs/, demo/).
DOCUMENTED = {"Committer", "StoreConfig", "Destination", "JobRecord", "TaskAttempt", "JobState"}


def front_door_violations(found: dict[str, list[Path]]) -> list[str]:
    """Imports of the core's rooms (anything but ``zero_rename.core`` itself) by the
    front ends."""
    return [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for layer in FRONT_ENDS
        for path in found.get(layer, [])
        for name in imports_of(path)
        if name.startswith("zero_rename.core.")
    ]


def names_from_the_front_door(found: dict[str, list[Path]]) -> set[str]:
    names = set()
    for layer in FRONT_ENDS:
        for path in found.get(layer, []):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module == "zero_rename.core":
                    names |= {a.name for a in node.names}
    return names


def test_the_front_ends_come_in_through_the_front_door() -> None:
    assert front_door_violations(modules()) == []


def test_the_front_door_exports_what_the_front_ends_use() -> None:
    import zero_rename.core

    used = names_from_the_front_door(modules())
    assert set(zero_rename.core.__all__) == used | DOCUMENTED
    assert set(zero_rename.core.__all__) == set(zero_rename.core._EXPORTS)


def test_the_front_door_check_catches_a_side_door(tmp_path: Path) -> None:
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "bad.py").write_text(
        "from zero_rename.core import Committer\n"
        "def later():\n    from zero_rename.core.protocol.abort import abort_each\n"
    )
    found = {"cli": [tmp_path / "cli" / "bad.py"]}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
        assert front_door_violations(found) == [
            "cli/bad.py imports zero_rename.core.protocol.abort"
        ]
    assert names_from_the_front_door(found) == {"Committer"}


def room_of(name: str) -> str | None:
    """The core's room a module name is in; None outside the core."""
    parts = name.split(".")
    if parts[:2] != ["zero_rename", "core"]:
        return None
    return parts[2] if len(parts) > 2 and parts[2] in ROOMS else "face"


def core_imports_of(path: Path, at_run_time: bool = False) -> list[str]:
    """The core modules ``path`` imports: ``from zero_rename.core.data import shards``
    counts as ``zero_rename.core.data.shards``; ``at_run_time``: not those only the
    type checker reads (under ``if TYPE_CHECKING:``)."""
    names = []
    tree = ast.parse(path.read_text(), str(path))
    if at_run_time:
        tree.body = [
            n
            for n in tree.body
            if not (isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
        ]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if room_of(node.module) not in (None, "face") and node.module.count(".") == 2:
                names += [f"{node.module}.{a.name}" for a in node.names]
            else:
                names.append(node.module)
    return [n for n in names if room_of(n) is not None]


def room_violations(core: Path) -> list[str]:
    found = []
    for path in sorted(core.rglob("*.py")):
        parts = path.relative_to(core).parts
        room = parts[0] if len(parts) > 1 else "face"
        if room != "tables":
            found += [
                f"core/{path.relative_to(core)} imports {name}"
                for name in imports_of(path)
                if name.split(".")[0] in TABLE_LIBRARIES
            ]
        for name in core_imports_of(path):
            inner = room_of(name)
            if inner == room or inner in ROOMS.get(room, ()):
                continue
            if (room, name) not in ROOM_EXCEPTIONS:
                found.append(f"core/{path.relative_to(core)} imports {name}")
    return found


def test_every_module_of_the_core_is_in_a_room() -> None:
    rooms = {p.relative_to(CORE).parts[0] for p in CORE.rglob("*.py") if p.parent != CORE}
    assert rooms == set(ROOMS) - {"face"}


def test_the_core_rooms_import_one_way() -> None:
    assert room_violations(CORE) == []


def test_the_exceptions_import_nothing_of_the_core() -> None:
    """The modules a lower room may import (and the formats' declarations the registry
    lists) import nothing of the core but the declarations' own type: no circle."""
    from zero_rename.core.tables import registry

    modules = [name for _, name in ROOM_EXCEPTIONS] + list(registry.PLUGINS)
    for name in modules:
        path = PLUGIN.joinpath(*name.split(".")).with_suffix(".py")
        assert set(core_imports_of(path, at_run_time=True)) <= DECLARATIONS, name


def test_the_room_check_catches_wrong_imports(tmp_path: Path) -> None:
    for room in ("s3", "data"):
        (tmp_path / room).mkdir()
    (tmp_path / "s3" / "bad.py").write_text(
        "from zero_rename.core.data.layout import Destination\n"
    )
    (tmp_path / "data" / "ok.py").write_text(
        "from zero_rename.core.protocol import states\nfrom zero_rename.core.s3 import client\n"
    )
    (tmp_path / "data" / "bad.py").write_text("import zero_rename.core.protocol.commit\n")
    assert room_violations(tmp_path) == [
        "core/data/bad.py imports zero_rename.core.protocol.commit",
        "core/s3/bad.py imports zero_rename.core.data.layout",
    ]


def test_core_imports_without_spark_or_airflow() -> None:
    code = (
        "import sys, zero_rename.core.committer, zero_rename.core.protocol.commit;"
        "bad=[m for m in sys.modules if m.split('.')[0] in ('pyspark','airflow','dagster')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def test_the_public_face_and_the_documented_import_paths() -> None:
    """The names the front ends and users import keep working, and importing one
    module of the store (a completes worker does) loads no room above it."""
    code = (
        "import sys\n"
        "import zero_rename.core.s3.fanout\n"
        "loaded = [m for m in sys.modules if m.startswith('zero_rename.core.')]\n"
        "assert not [m for m in loaded if '.protocol.' in m or '.data.' in m], loaded\n"
        "from zero_rename.core import Committer, StoreConfig, StepRunner, states, JobState\n"
        "from zero_rename.core import Destination, JobRecord, TaskAttempt\n"
        "from zero_rename.core.committer import Committer as C\n"
        "from zero_rename.core.store import StoreConfig as S, client_config\n"
        "from zero_rename import read_table, read_dataset\n"
        "from zero_rename.errors import ZeroRenameError, Retry, is_final\n"
        "assert C is Committer and S is StoreConfig and states.COMMITTED is JobState.COMMITTED\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
