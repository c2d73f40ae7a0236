"""Counting the HTTP requests a boto3 client sends, through botocore's event hooks.

Every method of the benchmark is measured the same way, whether it goes
through the committer's store layer or calls boto3 directly: each attempt
botocore sends (retries included) is one request.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from zero_rename.core.s3.completers import OPERATION as LIGHT_OP
from zero_rename.core.s3.completers import add_request_hook, remove_request_hook

# A run of at most this many requests between two runs of one operation is
# folded into them: a journal checkpoint amid thousands of completes is not a step.
_FOLDED = 3


@dataclass(frozen=True)
class Step:
    """Consecutive requests of one operation: a step of the timed phase."""

    op: str
    requests: int
    start: float  # seconds since the counter started
    seconds: float  # until the next step's first request, or the end
    folded: tuple[tuple[str, int], ...] = ()  # (operation, requests) folded in


class RequestTotals:
    """Totals of a run's counted ``requests`` (per operation) over its ``files``."""

    requests: dict[str, int]
    files: int

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    @property
    def requests_per_file(self) -> float:
        return self.total_requests / self.files if self.files else 0.0


class RequestCounter:
    """Requests per S3 operation, and the order and time each was sent.

    Use as a context manager around the timed phase; times are seconds since entry.
    Requests sent through botocore are seen by its ``before-send`` event; job
    commit's CompleteMultipartUpload requests on the light path by a request
    hook for the same client (:func:`zero_rename.core.s3.completers.add_request_hook`).
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self._events = client.meta.events
        self._lock = threading.Lock()
        self._start = 0.0
        self._end: float | None = None
        self.counts: dict[str, int] = {}
        # Runs of consecutive requests of one operation, [operation, first sent,
        # requests], kept as they come rather than one entry a request: memory
        # in the committing process is what the scale runs measure.
        self._runs: list[list[Any]] = []

    def __enter__(self) -> RequestCounter:
        self._start = time.perf_counter()
        self._events.register("before-send.s3", self._sent)
        add_request_hook(self._client, self._light_sent)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._events.unregister("before-send.s3", self._sent)
        remove_request_hook(self._client, self._light_sent)
        self._end = time.perf_counter() - self._start

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.counts.values())

    def steps(self) -> list[Step]:
        """The timed phase as steps: runs of consecutive requests of one operation."""
        with self._lock:
            runs = [(op, start, count) for op, start, count in self._runs]
        end = self._end if self._end is not None else time.perf_counter() - self._start
        return _fold(runs, end)

    def _light_sent(self, stage: str, key: str, context: dict[str, Any]) -> None:
        if stage == "send":
            self._count(LIGHT_OP)

    def _sent(self, event_name: str, **_: Any) -> None:
        # A before-send handler that returns a value replaces the HTTP response:
        # this one must return None.
        self._count(event_name.rsplit(".", 1)[-1])

    def _count(self, op: str) -> None:
        now = time.perf_counter() - self._start
        with self._lock:
            self.counts[op] = self.counts.get(op, 0) + 1
            if self._runs and self._runs[-1][0] == op:
                self._runs[-1][2] += 1
            else:
                self._runs.append([op, now, 1])


def _fold(runs: list[tuple[str, float, int]], end: float) -> list[Step]:
    """Merge runs of one operation separated by a few requests of others."""
    merged: list[tuple[str, float, int, dict[str, int]]] = []
    i = 0
    while i < len(runs):
        op, start, count = runs[i]
        folded: dict[str, int] = {}
        while (
            i + 2 < len(runs)
            and runs[i + 1][2] <= _FOLDED
            and runs[i + 2][0] == op
            and count > _FOLDED
        ):
            between = runs[i + 1][0]
            folded[between] = folded.get(between, 0) + runs[i + 1][2]
            count += runs[i + 2][2]
            i += 2
        merged.append((op, start, count, folded))
        i += 1
    starts = [start for _, start, _, _ in merged] + [end]
    return [
        Step(
            op,
            count + sum(folded.values()),
            starts[k],
            starts[k + 1] - starts[k],
            tuple(sorted(folded.items())),
        )
        for k, (op, _, count, folded) in enumerate(merged)
    ]
