"""The fence read, shared by the task attempts of one process.

After task commit an attempt must read the job record, and the read must be
sent after its own commit (its manifest's PUT, or its last upload) finished:
with S3's strong consistency such a read sees every decision taken before it.
Task attempts finishing together in one process (threads of one worker) can
share one read: a read sent after each of their commits serves them all, as
a database's group commit shares one log flush. Each attempt still gets a read
that started after its own commit; none gets an older answer.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from zero_rename.core.data.model import JobRecord

# Jobs whose shared fence a process keeps (a worker runs a few jobs at a time).
_KEPT = 64


class SharedRead:
    """Reads of one job's record, shared by callers whose commits came first."""

    def __init__(self, read: Callable[[], JobRecord]) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._started: float | None = None  # when the read in flight was sent
        self._result: tuple[float, JobRecord | BaseException] | None = None

    def after(self, committed_at: float) -> JobRecord:
        """A record read sent after ``committed_at`` (a ``time.monotonic()`` taken
        once the caller's commit had finished)."""
        with self._lock:
            while True:
                if self._result is not None and self._result[0] > committed_at:
                    return _value(self._result[1])
                if self._started is None:
                    break  # nobody reads: this caller does
                if self._started <= committed_at:
                    # The read in flight was sent too early for this caller:
                    # wait for it to finish, then read anew.
                    self._done.wait()
                    continue
                self._done.wait()
            started = self._started = time.monotonic()
        try:
            outcome: JobRecord | BaseException = self._read()
        except BaseException as exc:  # shared with the waiters, then raised here too
            outcome = exc
        with self._lock:
            self._result = (started, outcome)
            self._started = None
            self._done.notify_all()
        return _value(outcome)


def _value(outcome: JobRecord | BaseException) -> JobRecord:
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


_registry_lock = threading.Lock()
_registry: OrderedDict[tuple[int, str, str], SharedRead] = OrderedDict()


def shared_read(
    client_id: int, destination: str, job_id: str, read: Callable[[], JobRecord]
) -> SharedRead:
    """The process's shared fence read for one job over one S3 client."""
    key = (client_id, destination, job_id)
    with _registry_lock:
        found = _registry.get(key)
        if found is None:
            found = _registry[key] = SharedRead(read)
            while len(_registry) > _KEPT:
                _registry.popitem(last=False)
        else:
            _registry.move_to_end(key)
        return found
