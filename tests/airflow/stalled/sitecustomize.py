"""A Spark application stalled at its task commits, for a test that kills its worker.

On ``PYTHONPATH`` with ``ZERO_RENAME_HOLD_DIR`` set, every Python process of the
application (its driver, Spark's Python workers) loads this first. A task attempt
of a job named by a file ``hold-<job id>`` in that directory then stops at task
commit, its files written and their uploads pending: it marks
``held-<job id>-<task>`` and waits until the hold file is gone, then commits as
usual; a task commit refused then leaves the error's name in
``refused-<job id>-<task>``. Stalled executors cannot be had on demand from a
real cluster.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

HOLD_DIR = os.environ.get("ZERO_RENAME_HOLD_DIR")

if HOLD_DIR:
    from zero_rename.core.protocol import task

    _commit = task.TaskAttempt.commit

    def _held_commit(self: Any, publish: bool = True) -> Any:
        hold = Path(str(HOLD_DIR)) / f"hold-{self.job.job_id}"
        if not hold.exists():
            return _commit(self, publish)
        name = f"{self.job.job_id}-{self.task_id}"
        (hold.parent / f"held-{name}").touch()
        while hold.exists():
            time.sleep(0.1)
        try:
            return _commit(self, publish)
        except BaseException as exc:  # what its task commit met, for the test to read
            (hold.parent / f"refused-{name}").write_text(type(exc).__name__)
            raise

    task.TaskAttempt.commit = _held_commit  # type: ignore[method-assign]
