"""A sensor that reports jobs left in ``setup``: an engine that died, a run never finished.

Such a job holds pending uploads, which the store bills for and no reader
sees. The sensor names each job older than a threshold; with ``abort=True`` it
also requests a run of :data:`~zero_rename.dagster.ops.manual_abort_job` for
each (one per job: the run key is the job id).
"""

from collections.abc import Iterator, Sequence
from datetime import timedelta

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)

from zero_rename.core import states, utcnow
from zero_rename.dagster.ops import manual_abort_job
from zero_rename.dagster.resources import ZeroRenameResource

# Listed in a skip message at most; the log names them all.
SHOWN = 10


def stale_jobs_sensor(
    destinations: Sequence[str],
    older_than: timedelta = timedelta(hours=6),
    abort: bool = False,
    name: str = "zero_rename_stale_jobs",
    minimum_interval_seconds: int = 600,
    default_status: DefaultSensorStatus = DefaultSensorStatus.STOPPED,
) -> SensorDefinition:
    """Report (and, with ``abort``, abort) jobs still in setup after ``older_than``."""

    @sensor(
        name=name,
        job=manual_abort_job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=f"Jobs left in setup longer than {older_than} at "
        f"{', '.join(destinations)}" + ("; aborts them" if abort else ""),
    )
    def _stale_jobs(
        context: SensorEvaluationContext, zero_rename: ZeroRenameResource
    ) -> Iterator[RunRequest | SkipReason]:
        deadline = utcnow() - older_than
        stale = [
            (dest, record)
            for dest in destinations
            for record in zero_rename.committer(dest).jobs()
            if record.state == states.SETUP and record.created < deadline
        ]
        for dest, record in stale:
            context.log.warning(
                f"job {record.job_id} at {dest} is in setup since "
                f"{record.created:%Y-%m-%d %H:%M} UTC"
            )
        if not stale:
            yield SkipReason(f"no job in setup for longer than {older_than}")
            return
        if not abort:
            names = ", ".join(r.job_id for _, r in stale[:SHOWN])
            more = f" and {len(stale) - SHOWN} more" if len(stale) > SHOWN else ""
            yield SkipReason(
                f"{len(stale)} job(s) in setup for longer than {older_than}: "
                f"{names}{more}; abort them with {manual_abort_job.name}"
            )
            return
        for dest, record in stale:
            yield RunRequest(
                run_key=record.job_id,
                run_config={
                    "ops": {
                        "abort_job": {
                            "config": {
                                "destination": dest,
                                "job_id": record.job_id,
                                "reason": f"in setup since {record.created:%Y-%m-%d %H:%M} UTC, "
                                f"longer than {older_than} (sensor {name})",
                            }
                        }
                    }
                },
            )

    return _stale_jobs
