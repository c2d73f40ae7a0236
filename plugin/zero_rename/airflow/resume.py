"""A retried Spark stage: reattach to its application, or fence it off and write again.

A try of the stage whose worker dies may leave its application running. What
the next try does depends on whether that application can be found again:

- **reattach**: the apache-spark provider's resumable submit (``durable``, with
  Airflow 3.3's task state store) recorded the application's id: a Kubernetes
  driver pod (``track_driver_via_k8s_api``), a YARN application
  (``yarn_track_via_rm_api``), a standalone cluster's driver. The provider polls
  that application rather than submitting another (or submits anew if it ended
  in failure).
- **fence, then write again**: nothing can find it: a ``local[*]`` or client-mode
  ``spark-submit`` whose driver ran beside the dead worker, or a worker killed
  between the submit and the provider's record. The job is aborted, so none of
  that application's task attempts can commit into it
  (:meth:`zero_rename.core.steps.StepRunner.restage`), and the stage writes the
  run's next job; the later steps follow it (``StepRunner.successor``).

Which case applies is told by a mark in the task state store, set before each
submit and removed once the worker saw the application end: a mark naming a job
still in setup, without a stage manifest, is an application that may still be
writing it. An application the worker saw fail is not submitted again: Spark
retried its tasks already, and a failed write aborts its job.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from zero_rename.core import StepRunner
from zero_rename.errors import ZeroRenameError

log = logging.getLogger(__name__)

# The task state store's key for the stage's application (scoped to the task of
# one DAG run, kept across its tries). Renaming it loses the marks of running tries.
STAGE_KEY = "zero_rename_stage"


class Course(enum.Enum):
    """What a try of the stage does about an earlier try's application."""

    SUBMIT = "submit"  # no application of this job is left unseen
    REATTACH = "reattach"  # the provider finds it again by the id it recorded
    FENCE = "fence"  # it may be running and nothing can find it


def course(mark: Any, job_id: str, external_id: Any) -> Course:
    """The course for a try whose job is ``job_id`` (in setup, without a stage
    manifest), given the stage's mark and the provider's recorded application id."""
    if not isinstance(mark, Mapping) or mark.get("job_id") != job_id:
        return Course.SUBMIT
    if external_id is not None and external_id != mark.get("external_id"):
        # Recorded after this job's submit (the mark keeps the id seen before it).
        return Course.REATTACH
    return Course.FENCE


class StageApplications:
    """The stage's applications across the tries of one task instance."""

    def __init__(self, context: Context, runner: StepRunner, external_id_key: str) -> None:
        self.store = context.get("task_state_store")
        self.runner = runner
        self.external_id_key = external_id_key
        ti = context["ti"]
        self.where = f"try {ti.try_number} of task {ti.task_id} in run {context['run_id']}"
        self.retried = ti.try_number > 1
        self.external_id: Any = None  # the provider's recorded id before this submit

    def prepare(self, job_id: str) -> str:
        """Before a submit for ``job_id`` (in setup, no stage manifest): the job the
        stage writes, after fencing off an earlier application if need be."""
        if self.store is None:  # without a state store, any earlier try may have submitted
            mark: Any = {"job_id": job_id} if self.retried else None
        else:
            mark = self.store.get(STAGE_KEY)
            self.external_id = self.store.get(self.external_id_key)
        chosen = course(mark, job_id, self.external_id)
        if chosen is Course.REATTACH:
            log.info(
                "job %s: an earlier try's Spark application %s can be found again; the "
                "provider reattaches to it, or submits anew if it ended in failure",
                job_id,
                self.external_id,
            )
            self.external_id = mark.get("external_id")
            return job_id
        if chosen is Course.FENCE:
            job_id = self.runner.restage(
                job_id,
                "an earlier try of its stage submitted a Spark application that no worker "
                f"saw end and that cannot be found again ({self.where})",
            ).job_id
        if self.store is not None:
            self.store.set(STAGE_KEY, {"job_id": job_id, "external_id": self.external_id})
        return job_id

    def submit(self, job_id: str, write: Callable[[], object]) -> None:
        """Run the submit (``write``). Once it returns, the application is over and
        the mark goes. A failure is final where the worker saw the application end
        (the provider recorded no id to find it by: ``spark-submit`` exited) or its
        job was aborted; elsewhere the mark stays, for the next try to reattach."""
        try:
            write()
        except ZeroRenameError:
            raise  # the protocol's own errors, each with its retry meaning
        except Exception as exc:
            if self._tracked() and not self.runner.committer.job(job_id).decided:
                raise
            self._unmark()
            raise AirflowFailException(
                f"the Spark application writing job {job_id} failed ({exc}). Spark retried "
                "its tasks already, and a failed write aborts its job, so it is not "
                "submitted again: clear the run to write a new job"
            ) from exc
        self._unmark()

    def _tracked(self) -> bool:
        """Whether the provider recorded an id for this submit's application."""
        if self.store is None:
            return False
        return self.store.get(self.external_id_key) not in (None, self.external_id)

    def _unmark(self) -> None:
        if self.store is not None:
            self.store.delete(STAGE_KEY)
