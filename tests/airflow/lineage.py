"""The OpenLineage events of the DAG tests' runs, read back from the provider's file
transport (tests/airflow/environment.py), and the OpenLineage schema they must fit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.airflow.environment import OPENLINEAGE_EVENTS

SPEC = Path(__file__).with_name("openlineage_spec")
RUN_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
# Ours, shipped beside the operators; its facets name the base RunFacet's schema, as
# the Airflow provider's own custom facets do.
OWN_FACETS = {"zeroRename": "zero-rename:ZeroRenameRunFacet.json#/$defs/ZeroRenameRunFacet"}


def events(dag_id: str, run_id: str) -> list[dict[str, Any]]:
    """Every task event of one DAG run, in the order they were written."""
    found = [e for e in _all_events() if _dag_run(e) == (dag_id, run_id)]
    return sorted(found, key=lambda e: e["eventTime"])


def _all_events() -> Iterator[dict[str, Any]]:
    for path in sorted(OPENLINEAGE_EVENTS.iterdir()):
        yield json.loads(Path(path).read_text())


def _dag_run(event: dict[str, Any]) -> tuple[str, str] | None:
    """(DAG id, run id) of a task's event; None for a DAG run's own events."""
    airflow = event.get("run", {}).get("facets", {}).get("airflow", {})
    run = airflow.get("dagRun") or {}
    if "task" not in airflow:
        return None
    return run.get("dag_id"), run.get("run_id")


def leaked(secret: str) -> list[str]:
    """The event files that carry ``secret``."""
    return [p.name for p in sorted(OPENLINEAGE_EVENTS.iterdir()) if secret in p.read_text()]


def task_of(event: dict[str, Any]) -> str:
    return event["job"]["name"].rsplit(".", 1)[-1]


def by_task(found: list[dict[str, Any]]) -> dict[str, list[str]]:
    """task id -> its event types, in order."""
    tasks: dict[str, list[str]] = {}
    for event in found:
        tasks.setdefault(task_of(event), []).append(event["eventType"])
    return tasks


def written(event: dict[str, Any]) -> bool:
    """Whether an event says what was written: an output with its statistics."""
    return any("outputStatistics" in o.get("outputFacets", {}) for o in event["outputs"])


def first(found: list[dict[str, Any]], task: str) -> dict[str, Any]:
    """The task's first event (its first try's START)."""
    return [e for e in found if task_of(e) == task][0]


def last(found: list[dict[str, Any]], task: str) -> dict[str, Any]:
    """The task's last event (its COMPLETE or FAIL)."""
    return [e for e in found if task_of(e) == task][-1]


@cache
def registry() -> Registry:
    """OpenLineage's schemas by their $id, and ours, so that no $ref leaves the machine."""
    resources_ = [
        (document["$id"], Resource.from_contents(document))
        for document in (json.loads(p.read_text()) for p in sorted(SPEC.glob("*.json")))
    ]
    ours = json.loads(
        resources.files("zero_rename.airflow").joinpath("ZeroRenameRunFacet.json").read_text()
    )
    resources_.append(("zero-rename:ZeroRenameRunFacet.json", Resource.from_contents(ours)))
    return Registry().with_resources(resources_)


def validate(event: dict[str, Any]) -> list[str]:
    """What is wrong with an event: against OpenLineage's RunEvent, then each facet
    against its own schema (as its ``_schemaURL`` names it) where that schema is known."""
    problems = _problems(RUN_EVENT, event, "event")
    for where, key, facet in facets(event):
        url = OWN_FACETS.get(key) or facet.get("_schemaURL", "")
        if url.split("#")[0] in registry() and "#" in url:
            problems += _problems(url, facet, f"{where} facet {key}")
    return problems


def facets(event: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(where, key, facet) of every facet of an event: run, job, datasets'."""
    yield from (("run", k, f) for k, f in event["run"].get("facets", {}).items())
    yield from (("job", k, f) for k, f in event["job"].get("facets", {}).items())
    for dataset in [*event.get("inputs", []), *event.get("outputs", [])]:
        for group in ("facets", "inputFacets", "outputFacets"):
            for key, facet in dataset.get(group, {}).items():
                yield f"dataset {dataset['name']}", key, facet


def _problems(url: str, instance: Any, where: str) -> list[str]:
    return [f"{where}: {e.json_path}: {e.message}" for e in _validator(url).iter_errors(instance)]


@cache
def _validator(url: str) -> Draft202012Validator:
    return Draft202012Validator(
        {"$ref": url}, registry=registry(), format_checker=Draft202012Validator.FORMAT_CHECKER
    )
