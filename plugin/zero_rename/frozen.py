"""How the package's typed values are made: the pydantic configuration every model of
the commit data, the job's options and the store's profile shares.

A value is frozen (its fields cannot change once validated) and refuses a field
it does not know, so a record written by a newer version, or mistyped by hand,
is named as wrong rather than read in part.

Its validator is built when the model is first used, not when its module is
imported (pydantic's ``defer_build``). Each of a Spark write's driver-side
steps runs in a fresh Python worker that imports the whole committer but
validates a handful of its models: building all of them at import cost such a
worker 10 to 35 ms of CPU, twice on every write's critical path
(docs/benchmarks.md). Deferred, a model's first use from two threads at once
is safe only from pydantic 2.14, which builds under a lock; before it, a
second thread could validate with the parent model's validator (pydantic
#13419), so there every model is built at import, as it always was.
"""

from __future__ import annotations

from pydantic import ConfigDict
from pydantic.version import VERSION

__all__ = ["DEFER_BUILD", "frozen"]


def _builds_under_a_lock(version: str) -> bool:
    major, minor = (int(part) for part in version.split(".")[:2])
    return (major, minor) >= (2, 14)


DEFER_BUILD = _builds_under_a_lock(VERSION)


def frozen(*, populate_by_name: bool = False) -> ConfigDict:
    """A model's configuration: frozen, no unknown field, built on first use;
    ``populate_by_name``: a field with an alias is also taken by its name."""
    config = ConfigDict(frozen=True, extra="forbid", defer_build=DEFER_BUILD)
    if populate_by_name:
        config["populate_by_name"] = True
    return config
