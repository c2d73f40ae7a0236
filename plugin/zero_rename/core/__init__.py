"""zero-rename's core: the protocol, the commit data, the table formats and the S3
store, in four rooms.

- :mod:`zero_rename.core.protocol`: the steps and the job state machine;
- :mod:`zero_rename.core.tables`: a committed job published to Iceberg or Delta;
- :mod:`zero_rename.core.data`: what the protocol writes (records, manifests,
  plans, layout, shards);
- :mod:`zero_rename.core.s3`: the S3 store (client, requests, listings,
  completes, probes, profiles).

The front ends need only the names below (``from zero_rename.core import
Committer, StoreConfig``): the :class:`Committer` with every step of one
destination, the :class:`StepRunner` with the policies the front ends share,
and the types they pass around. They are imported on first use, so that a
worker importing one module of the store pays for nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the module it comes from ("states" is the state machine's module itself)
_EXPORTS = {
    "Committer": "zero_rename.core.committer",
    "StepRunner": "zero_rename.core.steps",
    "SUMMARY_KEY": "zero_rename.core.steps",
    "describe": "zero_rename.core.steps",
    "failures_as": "zero_rename.core.steps",
    "run_job_id": "zero_rename.core.steps",
    "S3Store": "zero_rename.core.s3.client",
    "StoreConfig": "zero_rename.core.s3.client",
    "Destination": "zero_rename.core.data.layout",
    "JobOptions": "zero_rename.core.data.options",
    "JobRecord": "zero_rename.core.data.model",
    "JobSummary": "zero_rename.core.data.model",
    "OutputCheck": "zero_rename.core.data.model",
    "TaskManifest": "zero_rename.core.data.model",
    "TaskAttempt": "zero_rename.core.protocol.task",
    "JobState": "zero_rename.core.protocol.states",
    "states": "zero_rename.core.protocol.states",
}
__all__ = [
    "Committer",
    "Destination",
    "JobOptions",
    "JobRecord",
    "JobState",
    "JobSummary",
    "OutputCheck",
    "S3Store",
    "SUMMARY_KEY",
    "StepRunner",
    "StoreConfig",
    "TaskAttempt",
    "TaskManifest",
    "describe",
    "failures_as",
    "run_job_id",
    "states",
]

if TYPE_CHECKING:
    from zero_rename.core.committer import Committer
    from zero_rename.core.data.layout import Destination
    from zero_rename.core.data.model import JobRecord, JobSummary, OutputCheck, TaskManifest
    from zero_rename.core.data.options import JobOptions
    from zero_rename.core.protocol import states
    from zero_rename.core.protocol.states import JobState
    from zero_rename.core.protocol.task import TaskAttempt
    from zero_rename.core.s3.client import S3Store, StoreConfig
    from zero_rename.core.steps import (
        SUMMARY_KEY,
        StepRunner,
        describe,
        failures_as,
        run_job_id,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    found = importlib.import_module(module)
    value = found if name == "states" else getattr(found, name)
    globals()[name] = value
    return value
