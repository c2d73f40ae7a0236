"""What the Commits page shows about a destination, read from S3 only.

Reads job records, stage manifests, the pending-upload listing, ``_SUCCESS``,
the claims, committed file lists and one listing of the destination (the
partition view): the protocol's own metadata, never a data file's contents. Nothing here carries a
credential or the endpoint: an error is shown through :func:`shown_error`,
which hides every URL but the destination's and the connection's endpoint.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import quote, urlsplit

from zero_rename.airflow.ui.chart import Chart, history_chart
from zero_rename.core import (
    Committer,
    HistoryEntry,
    Holder,
    JobRecord,
    JobSummary,
    OutputCheck,
    PartitionInfo,
    TableCommit,
    file_job_id,
    files_committed,
    states,
    stuck_advice,
)
from zero_rename.errors import ZeroRenameError

log = logging.getLogger(__name__)

# Partitions the page lists (those held by a job first); the command line lists all.
PAGE_PARTITIONS = 100
# A destination holding more objects is not listed for its partitions on every
# page view (a thousand objects a request): the command line does it.
PAGE_OBJECTS = 100_000

STEP_ORDER = (
    "setup",
    "stage",
    "validate",
    "resolve_conflicts",
    "commit",
    "publish_table",
    "validate_output",
    "rollback",
    "abort",
)


@dataclass(frozen=True)
class StepView:
    name: str
    status: str
    started: datetime
    finished: datetime | None
    seconds: float | None
    detail: str
    error: str = ""  # what a failed step failed with, one line, secrets masked

    @property
    def label(self) -> str:
        """The status for people: ``rolled back``."""
        return self.status.replace("_", " ")


@dataclass(frozen=True)
class JobView:
    job_id: str
    state: str
    created: datetime
    updated: datetime
    conflict_mode: str
    partition_columns: tuple[str, ...]
    steps: tuple[StepView, ...]
    tasks: int | None
    files: int | None
    bytes: int | None
    rows: int | None
    partitions: tuple[str, ...]
    pending_uploads: int
    error: str = ""  # why it was aborted (or what its record says went wrong)
    requests: int | None = None  # S3 requests of the job commit, or of the abort
    run_url: str = ""  # the Airflow DAG run that set the job up, in Airflow's UI
    run_text: str = ""
    output_check: OutputCheck | None = None  # the last check after its commit, if one ran
    table_format: str = "none"  # the job's table format option
    table_commit: TableCommit | None = None  # its commit of the table format, once published


@dataclass(frozen=True)
class SuccessView:
    job_id: str
    committer: str
    date: str
    files: int
    bytes: int
    rows: int
    partitions: tuple[str, ...]


@dataclass(frozen=True)
class StuckView:
    """A stuck job, what it holds and what to do about it."""

    job_id: str
    state: str
    updated: datetime
    partitions: int  # how many its claim holds
    advice: str


@dataclass
class DestinationView:
    url: str
    jobs: list[JobView] = field(default_factory=list)
    total_jobs: int = 0
    success: SuccessView | None = None
    error: str = ""
    history: tuple[HistoryEntry, ...] = ()  # the jobs of the table, oldest first
    chart: Chart | None = None
    partitions: list[PartitionInfo] = field(default_factory=list)  # those shown
    total_partitions: int = 0
    partitions_listed: bool = True  # False: too many objects to list here
    holders: tuple[Holder, ...] = ()
    stuck: list[StuckView] = field(default_factory=list)
    run_seconds: dict[str, float] = field(default_factory=dict)  # :func:`run_seconds`, by job


def step_views(record: JobRecord) -> tuple[StepView, ...]:
    names = sorted(record.steps, key=lambda n: STEP_ORDER.index(n) if n in STEP_ORDER else 99)
    views = []
    for name in names:
        t = record.steps[name]
        views.append(StepView(name, t.status, t.started, t.finished, t.seconds, t.detail, t.error))
    return tuple(views)


def run_seconds(record: JobRecord) -> float | None:
    """A committed job's whole run, from its setup step's start (the record's creation
    without one) to the end of its commit step: where the run's time went, beside
    the commit step's own seconds."""
    commit = record.steps.get("commit")
    if record.state != states.COMMITTED or commit is None or commit.finished is None:
        return None
    setup = record.steps.get("setup")
    start = setup.started if setup is not None else record.created
    return max(0.0, (commit.finished - start).total_seconds())


def _counts(committer: Committer, record: JobRecord) -> JobSummary | None:
    """Committed jobs report their summary; staged ones what their stage manifest holds."""
    if record.summary is not None:
        return record.summary
    if record.state in states.FAILED:
        return None
    return committer.stage_summary(record.job_id, record.state)


def job_view(committer: Committer, record: JobRecord, pending: Counter[str]) -> JobView:
    counts = _counts(committer, record)
    return JobView(
        job_id=record.job_id,
        state=record.state,
        created=record.created,
        updated=record.updated,
        conflict_mode=record.options.conflict_mode,
        partition_columns=record.options.partition_columns,
        steps=step_views(record),
        tasks=counts.tasks if counts else None,
        files=counts.files if counts else None,
        bytes=counts.bytes if counts else None,
        rows=counts.rows if counts else None,
        partitions=counts.partitions if counts else (),
        pending_uploads=pending[record.job_id],
        error=record.error,
        requests=record.summary.requests if record.summary else None,
        output_check=record.output_check,
        table_format=record.options.table_format,
        table_commit=record.table_commit,
        **origin_link(record),
    )


def origin_link(record: JobRecord) -> dict[str, str]:
    """The Airflow DAG run (and task) that set the job up, as a link into Airflow's UI."""
    dag, run = record.origin.get("airflow_dag_id"), record.origin.get("airflow_run_id")
    if not dag or not run:
        return {}
    task = record.origin.get("airflow_task_id", "")
    url = f"/dags/{quote(dag, safe='')}/runs/{quote(run, safe='')}"
    return {
        "run_url": url + (f"/tasks/{quote(task, safe='')}" if task else ""),
        "run_text": f"{dag} / {run}",
    }


def pending_by_job(committer: Committer) -> Counter[str]:
    """Pending uploads per job, by the job id every data file name carries."""
    return Counter(
        job_id for u in committer.pending_uploads() if (job_id := file_job_id(u.key)) is not None
    )


def success_view(committer: Committer) -> SuccessView | None:
    success = committer.read_success()
    if success is None:
        return None
    metrics = success.metrics
    return SuccessView(
        job_id=success.job_id,
        committer=success.committer,
        date=success.date,
        files=metrics.get("committer_files_committed", files_committed(success)),
        bytes=metrics.get("committer_bytes_committed", 0),
        rows=metrics.get("committer_rows_committed", 0),
        partitions=success.partitions,
    )


def destination_view(
    committer: Committer, limit: int, job_id: str | None = None
) -> DestinationView:
    """The newest ``limit`` jobs (and ``job_id`` if older), newest first, their
    history chart, and the partition view; every job record is read once."""
    view = DestinationView(url=committer.dest.url)
    try:
        parts = committer.partitions(max_objects=PAGE_OBJECTS)
        records = sorted(parts.records.values(), key=lambda r: r.created)
        view.total_jobs = len(records)
        shown = records[::-1][:limit]
        shown += [r for r in records if r.job_id == job_id and r not in shown]
        pending = pending_by_job(committer)
        view.jobs = [job_view(committer, r, pending) for r in shown]
        view.success = success_view(committer)
        history = committer.history(limit=limit, known=parts.records)
        view.history = history.entries
        runs = {j: run_seconds(r) for j, r in history.records.items()}
        view.run_seconds = {j: seconds for j, seconds in runs.items() if seconds is not None}
        view.chart = history_chart(history.entries, job_id, view.run_seconds)
        view.partitions = page_partitions(parts.partitions)
        view.total_partitions = len(parts.partitions)
        view.partitions_listed = parts.complete
        view.holders = parts.holders
        view.stuck = [
            stuck_view(committer, parts.records[j], parts.holders) for j in parts.stuck_jobs
        ]
    except Exception as exc:
        view.error = shown_error(exc, committer.store.endpoint_url)
    return view


def page_partitions(partitions: tuple[PartitionInfo, ...]) -> list[PartitionInfo]:
    """Those the page lists: every one held by a job, then the newest by name
    (``dt=`` dates sort as days), at most PAGE_PARTITIONS."""
    held = [p for p in partitions if p.holders]
    rest = [p for p in reversed(partitions) if not p.holders]
    return (held + rest)[: max(PAGE_PARTITIONS, len(held))]


def stuck_view(committer: Committer, record: JobRecord, holders: tuple[Holder, ...]) -> StuckView:
    held = next((h for h in holders if h.job_id == record.job_id), None)
    return StuckView(
        job_id=record.job_id,
        state=record.state.label,
        updated=record.updated,
        partitions=len(held.dirs) if held else 0,
        advice=stuck_advice(record.state, committer.dest.url, record.job_id),
    )


# Any URL but a destination's (s3://, s3a://) is hidden: botocore puts the
# endpoint's in its connection errors ('Could not connect to the endpoint URL:
# "http://..."'). A URL is a scheme (a letter, then letters, digits, '+', '.',
# '-'; starting a word) before "://", and what follows up to a blank, a quote,
# '<', '>' or ')'. Found from each "://" rather than by one pattern tried at
# every character, which rescans a long word from each of its characters.
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_URL_BODY = re.compile(r"[^\s\"'<>)]*")
_WORD_CHAR = re.compile(r"\w")
_DESTINATIONS = ("s3://", "s3a://")
HIDDEN = "[endpoint hidden]"


def shown_error(exc: BaseException, endpoint: str | None) -> str:
    """What the page says about an error: the store's own words for what it
    refused, never the endpoint (nor any other URL but a destination's), never a
    traceback. Anything not zero-rename's is named by its type only and logged
    in full in the api-server's log."""
    if not isinstance(exc, ZeroRenameError):
        log.warning("Commits page: %s", type(exc).__name__, exc_info=exc)
        return f"{type(exc).__name__} (details in the api-server's log)"
    return hide_endpoint(f"{type(exc).__name__}: {exc}", endpoint)


def hide_endpoint(text: str, endpoint: str | None) -> str:
    text = hide_urls(text)
    if endpoint:
        parts = urlsplit(endpoint)
        # host:port always; a bare host name only if it cannot be a word of a
        # bucket or key name (a dotted name or an address).
        for shown in (parts.netloc, parts.hostname if "." in (parts.hostname or "") else ""):
            if shown:
                text = text.replace(shown, HIDDEN)
    return text


def hide_urls(text: str) -> str:
    """``text`` with every URL but a destination's replaced by HIDDEN; linear in
    the text (each character is looked at a bounded number of times)."""
    pieces: list[str] = []
    done = search = 0
    while (sep := text.find("://", search)) >= 0:
        start = sep
        while start > done and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        begin = next((p for p in range(start, sep) if _opens_url(text, p)), None)
        if begin is None:
            search = sep + 1
            continue
        body = _URL_BODY.match(text, sep + 3)
        end = body.end() if body else sep + 3
        pieces += [text[done:begin], HIDDEN]
        done = search = end
    return "".join([*pieces, text[done:]]) if pieces else text


def _opens_url(text: str, at: int) -> bool:
    """Whether a URL's scheme may start at ``at``: an ASCII letter starting a word,
    and not a destination's ``s3://`` or ``s3a://``."""
    char = text[at]
    if not (char.isascii() and char.isalpha()):
        return False
    if at > 0 and _WORD_CHAR.match(text[at - 1]):
        return False
    return not text.startswith(_DESTINATIONS, at)
