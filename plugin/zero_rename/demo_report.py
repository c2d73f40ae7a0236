"""What the demos print at the end: the committed job and its rows per partition.

Shared by ``make demo`` (Airflow) and ``make demo-dagster``; it reads the table
as a reader does (:func:`zero_rename.read_table`), so it shows committed rows only.
"""

from __future__ import annotations

from zero_rename.core.committer import Committer
from zero_rename.core.store import StoreConfig


def committed_report(destination: str, config: StoreConfig, column: str = "dt") -> list[str]:
    """Lines naming the last committed job, pending uploads, and rows per ``column`` value."""
    from zero_rename.read import read_table

    committer = Committer(destination, config)
    success = committer.read_success()
    pending = committer.pending_uploads()
    if success is None:
        return [f"nothing committed at {destination}; {len(pending)} upload(s) pending"]
    values = read_table(destination, columns=[column], store_config=config).column(column)
    counts: dict[str, int] = {}
    for value in values.to_pylist():
        counts[str(value)] = counts.get(str(value), 0) + 1
    lines = [f"committed job {success.job_id} at {destination} "
             f"({success.file_count or len(success.files)} file(s), "
             f"{len(pending)} upload(s) pending):"]
    lines += [f"  {column}={value}: {rows} row(s)" for value, rows in sorted(counts.items())]
    return lines
