"""Completing many multipart uploads at once, in this process or in worker processes.

A job commit of a million files is a million CompleteMultipartUpload calls,
and one interpreter spends a millisecond or more of CPU on each through
botocore, whatever its thread count: the GIL makes that a ceiling near 1,000
completes a second. Two things lift it (measured by ``bench/fanout_probe.py``,
see docs/benchmarks.md):

- a lighter request path (:mod:`zero_rename.core.s3.completers`), which needs
  less than half that CPU per complete;
- worker processes, each with its own interpreter, client and threads, so the
  ceiling grows with cores wherever there are cores to spare.

:func:`complete_uploads` does both: the light path by default, and workers
where they paid (:func:`default_processes`: one per core, at most four, for
5,000 uploads or more, and none when the store runs on this machine). The
caller streams ``(index, key, upload_id, parts)`` items in, from a generator
if it likes, and gets a :class:`Completion` per item back as soon as it is
known, in completion order. Memory stays bounded: at most twice ``threads``
items are in flight in all.

Workers are fresh interpreters (``python -c``) running this module, not
``multiprocessing`` children: ``fork`` would copy a parent full of threads
(Spark's, Airflow's, our own pools) with whatever locks they held, and
``spawn``/``forkserver`` import the parent's ``__main__`` again, which re-runs
a job script that lacks an ``if __name__ == "__main__"`` guard. Each worker
gets the parent's ``sys.path`` and the :class:`StoreConfig` (endpoint, region,
pool, retries) over its socket and finds credentials through boto3's
standard chain, in the environment it inherits: no secret crosses the pipe or
the command line. POSIX only.

A worker stops when it has finished its share, when the parent asks (an
exception in the parent, ``KeyboardInterrupt``, the consumer closing the
stream) and when the parent's end of its socket closes (the parent died). A
worker that dies raises :class:`~zero_rename.errors.FanoutWorkerError` in the
parent; the uploads it had in flight may or may not be complete.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from types import TracebackType
from typing import Any, cast
from urllib.parse import urlsplit

from zero_rename.core.s3.client import StoreConfig
from zero_rename.core.s3.completers import (
    REQUEST_PATHS,
    CompleteFailure,
    LightTarget,
    light_path_unsupported,
    make_completer,
)
from zero_rename.core.s3.stats import RequestStats
from zero_rename.errors import ConfigError, FanoutWorkerError

log = logging.getLogger(__name__)

Item = tuple[int, str, str, Sequence[tuple[int, str]]]
"""One upload to complete: the caller's index, the key, the upload id, (number, ETag) parts."""

# Workers pay where the client is the bottleneck and has cores to itself
# (docs/benchmarks.md: one per core did best, more than cores did worse); the
# cap keeps a big driver from flooding one store.
MAX_DEFAULT_PROCESSES = 4
# Below this many uploads a worker's start (an interpreter, botocore: about
# 0.5-0.8 s of CPU) costs more than it saves (docs/benchmarks.md, N = 2,000).
MIN_UPLOADS_FOR_WORKERS = 5000
_LOOPBACK = ("localhost", "::1")
# Items in flight per worker thread: one being sent, one queued behind it.
IN_FLIGHT_PER_THREAD = 2
# Results a worker sends in one message, at most.
RESULT_BATCH = 256
# After asking a worker to stop: how long its in-flight requests may take to finish.
STOP_GRACE_SECONDS = 5.0
AUTO = "auto"

_BOOTSTRAP = (
    "import sys\n"
    "from multiprocessing.connection import Connection\n"
    "conn = Connection(int(sys.argv[1]))\n"
    "sys.path[:] = conn.recv()\n"
    "from zero_rename.core.s3.fanout import worker_main\n"
    "sys.exit(worker_main(conn))\n"
)


@dataclass(frozen=True)
class Completion:
    """The fate of one item: its ETag, or why it was not completed."""

    index: int
    key: str
    etag: str | None
    failure: CompleteFailure | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass(frozen=True)
class _Error:
    """An unexpected exception in a worker thread: a bug or a broken environment."""

    text: str


@dataclass(frozen=True)
class _Setup:
    """What a worker needs to know; no secret."""

    config: StoreConfig
    bucket: str
    threads: int
    path: str
    target: LightTarget | None
    number: int


_Result = Completion | _Error


def default_processes(config: StoreConfig, uploads: int | None = None) -> int:
    """Processes to complete ``uploads`` uploads with (None: many), as measured best.

    One per core, at most :data:`MAX_DEFAULT_PROCESSES`; but 1 (no workers)
    for fewer than :data:`MIN_UPLOADS_FOR_WORKERS` uploads, and 1 where the
    store is on this machine: its server needs the same cores, and workers
    measured slower there than one process on the light path.
    """
    if uploads is not None and uploads < MIN_UPLOADS_FOR_WORKERS:
        return 1
    if config.endpoint_url is not None and _is_loopback(config.endpoint_url):
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, MAX_DEFAULT_PROCESSES))


def _is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host in _LOOPBACK or host.startswith("127.")


def complete_uploads(
    config: StoreConfig,
    bucket: str,
    items: Iterable[Item],
    *,
    processes: int | None = None,
    threads: int | None = None,
    request_path: str = AUTO,
    stats: RequestStats | None = None,
    owner: Any = None,
) -> Completions:
    """Complete every item's upload; iterate the result for one :class:`Completion` each.

    ``processes``: 1 completes in this process; more start that many workers
    (default :func:`default_processes` for an unknown number of uploads; a
    caller that knows the number should pass ``default_processes(config, n)``).
    ``threads``: requests in flight in all, shared among the workers (default
    ``config.max_pool_connections``).
    ``request_path``: "light", "botocore", or "auto" (light unless
    :func:`~zero_rename.core.s3.completers.light_path_unsupported` says otherwise).
    Each worker's request statistics are merged into ``stats`` as it finishes,
    and kept apart in :attr:`Completions.worker_stats`. ``owner``: the client
    whose request hooks the light path runs in this process
    (:func:`~zero_rename.core.s3.completers.add_request_hook`; workers run none).

    Failures of single uploads are completions with a ``failure``; a crashed
    worker or a bug raises :class:`~zero_rename.errors.FanoutWorkerError`,
    and whatever ``items`` raises is raised as it is, after the workers stop.
    Close the stream (or leave a ``with`` block) to stop early.
    """
    processes = default_processes(config) if processes is None else processes
    threads = config.max_pool_connections if threads is None else threads
    for name, value in (("processes", processes), ("threads", threads)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"complete_uploads: {name} must be a positive integer, got {value!r}")
    if processes > 1 and not sys.executable:
        log.warning("no Python executable to start workers with; completing in this process")
        processes = 1
    path = choose_path(config, bucket, request_path)
    return Completions(
        config,
        bucket,
        items,
        processes,
        threads,
        path,
        stats if stats is not None else RequestStats(),
        owner,
    )


def _light_target(config: StoreConfig, bucket: str, owner: Any) -> LightTarget:
    """Where the light path sends: as the owner's light client sends (it resolved
    it without botocore's S3 model), else as botocore resolves it, asking the
    owner's own botocore client where there is one."""
    known = getattr(owner, "light_target", None)
    if callable(known):
        target: LightTarget = known(bucket)
        return target
    return LightTarget.resolve(config, bucket, owner)


def choose_path(config: StoreConfig, bucket: str, request_path: str) -> str:
    """The request path ``request_path`` means here: ``auto`` becomes light or botocore."""
    if request_path == AUTO:
        why = light_path_unsupported(config, bucket)
        if why is None:
            return "light"
        log.info("completing uploads through botocore: %s", why)
        return "botocore"
    if request_path not in REQUEST_PATHS:
        raise ConfigError(
            f"request path {request_path!r}: choose from {AUTO}, {', '.join(REQUEST_PATHS)}"
        )
    return request_path


class Completions(Iterator[Completion]):
    """The stream of completions; an iterator and a context manager."""

    def __init__(
        self,
        config: StoreConfig,
        bucket: str,
        items: Iterable[Item],
        processes: int,
        threads: int,
        path: str,
        stats: RequestStats,
        owner: Any = None,
    ) -> None:
        self.stats = stats
        self._owner = owner
        self.request_path = path
        self.processes = processes
        # One request-statistics snapshot per worker (or one for this process), as each ends.
        self.worker_stats: list[Mapping[str, Any]] = []
        self._workers: list[_Worker] = []
        target = _light_target(config, bucket, owner) if path == "light" else None
        self._stream = (
            self._run_here(config, bucket, iter(items), threads, path, target)
            if processes == 1
            else self._run_workers(config, bucket, iter(items), processes, threads, path, target)
        )

    def __next__(self) -> Completion:
        return next(self._stream)

    def close(self) -> None:
        """Stop: no more items are sent; workers finish their requests in flight and exit."""
        self._stream.close()

    def __enter__(self) -> Completions:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def worker_pids(self) -> list[int]:
        """The worker processes' ids (empty in-process, or before the first item)."""
        return [w.proc.pid for w in self._workers]

    def _finished(self, snapshot: Mapping[str, Any]) -> None:
        self.worker_stats.append(snapshot)
        self.stats.merge_snapshot(snapshot)

    # -- in this process ---------------------------------------------------
    def _run_here(
        self,
        config: StoreConfig,
        bucket: str,
        items: Iterator[Item],
        threads: int,
        path: str,
        target: LightTarget | None,
    ) -> Generator[Completion, None, None]:
        engine = _Engine(config, bucket, threads, path, target, self._owner)
        window = IN_FLIGHT_PER_THREAD * threads
        in_flight, exhausted, finished = 0, False, False
        try:
            while True:
                while not exhausted and in_flight < window:
                    item = next(items, None)
                    exhausted = item is None
                    if item is not None:
                        engine.submit(item)
                        in_flight += 1
                if in_flight == 0:
                    break
                result = engine.results.get()
                in_flight -= 1
                yield _checked(result, "this process")
            finished = True
        finally:
            engine.close(cancel=not finished)
            self._finished(engine.stats.snapshot())

    # -- in worker processes -----------------------------------------------
    def _run_workers(
        self,
        config: StoreConfig,
        bucket: str,
        items: Iterator[Item],
        processes: int,
        threads: int,
        path: str,
        target: LightTarget | None,
    ) -> Generator[Completion, None, None]:
        per_worker = -(-threads // processes)
        worker_config = dataclasses.replace(config, max_pool_connections=max(per_worker, 1))
        finished = False
        try:
            for number in range(processes):
                self._workers.append(
                    _Worker.start(_Setup(worker_config, bucket, per_worker, path, target, number))
                )
            exhausted = False
            while True:
                if not exhausted:
                    exhausted = _feed(self._workers, items, per_worker)
                live = [w for w in self._workers if not w.done]
                if not live:
                    break
                ready = wait([w.conn for w in live])
                for worker in live:
                    if worker.conn in ready:
                        yield from self._receive(worker)
            finished = True
        finally:
            _stop_all(self._workers, graceful=finished, on_done=self._finished)

    def _receive(self, worker: _Worker) -> Iterator[Completion]:
        message = worker.receive()
        kind = message[0]
        if kind == "results":
            worker.in_flight -= len(message[1])
            for result in message[1]:
                yield _checked(result, worker.name)
        elif kind == "done":
            worker.done = True
            self._finished(message[1])
        elif kind == "error":
            raise FanoutWorkerError(f"{worker.name} failed:\n{message[1]}")


def _checked(result: _Result, where: str) -> Completion:
    if isinstance(result, _Error):
        raise FanoutWorkerError(f"completing uploads in {where} failed:\n{result.text}")
    return result


def _feed(workers: list[_Worker], items: Iterator[Item], per_worker: int) -> bool:
    """Send items to workers with room, in batches; True once ``items`` is exhausted
    (then each worker is told that no more come)."""
    # Below half a window, a batch would be too small to be worth a message.
    minimum = max(1, per_worker * IN_FLIGHT_PER_THREAD // 2)
    for worker in sorted(workers, key=lambda w: w.in_flight):
        room = worker.window - worker.in_flight
        if room < minimum:
            continue
        batch = []
        for item in items:
            batch.append(item)
            if len(batch) >= room:
                break
        if batch:
            worker.send_items(batch)
        if len(batch) < room:  # the items ran out
            for other in workers:
                other.end()
            return True
    return False


@dataclass(eq=False)
class _Worker:
    """A worker process and the parent's end of its socket."""

    proc: subprocess.Popen[bytes]
    conn: Connection
    number: int
    window: int
    in_flight: int = 0
    ended: bool = False  # told that no more items come
    done: bool = False  # said it finished

    @classmethod
    def start(cls, setup: _Setup) -> _Worker:
        ours, theirs = socket.socketpair()
        conn = Connection(ours.detach())
        with theirs:  # the parent keeps no copy, so a worker's death reads as EOF
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-c", _BOOTSTRAP, str(theirs.fileno())],
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                )
            except BaseException:
                conn.close()
                raise
        worker = cls(proc, conn, setup.number, IN_FLIGHT_PER_THREAD * setup.threads)
        try:
            conn.send(list(sys.path))
            conn.send(setup)
        except OSError:
            pass  # it died at once: receive() reports how
        log.debug("started %s", worker.name)
        return worker

    @property
    def name(self) -> str:
        return f"complete worker {self.number} (pid {self.proc.pid})"

    def send_items(self, batch: list[Item]) -> None:
        self.in_flight += len(batch)
        try:
            self.conn.send(("items", batch))
        except OSError:
            pass  # it died: receive() reports how

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            try:
                self.conn.send(("end",))
            except OSError:
                pass

    def receive(self) -> tuple[Any, ...]:
        try:
            message: tuple[Any, ...] = self.conn.recv()
            return message
        except (EOFError, OSError):
            pass
        try:
            code: int | None = self.proc.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            code = None
        raise FanoutWorkerError(
            f"{self.name} {'exited with ' + str(code) if code is not None else 'hung up'} "
            f"before finishing; the outcome of its {self.in_flight} upload(s) in flight is "
            "unknown"
        )

    def stop(self) -> None:
        """Ask it to stop; its in-flight requests finish, queued ones are dropped."""
        try:
            self.conn.send(("stop",))
        except OSError:
            pass


def _stop_all(
    workers: list[_Worker], graceful: bool, on_done: Callable[[Mapping[str, Any]], None]
) -> None:
    """Wait for every worker to exit; on the error path ask them to stop first and
    give them :data:`STOP_GRACE_SECONDS` before they are terminated."""
    if not graceful:
        for worker in workers:
            if not worker.done:
                worker.stop()
        _drain(workers, time.monotonic() + STOP_GRACE_SECONDS, on_done)
    for worker in workers:
        try:
            worker.proc.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop; terminating it", worker.name)
            worker.proc.terminate()
            try:
                worker.proc.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                worker.proc.kill()
                worker.proc.wait()
        worker.conn.close()


def _drain(
    workers: list[_Worker], deadline: float, on_done: Callable[[Mapping[str, Any]], None]
) -> None:
    """Drop the results stopping workers still send, so none blocks on a full
    socket; keep their request statistics, since their requests were made."""
    open_ = {w.conn: w for w in workers if not w.done}
    while open_ and time.monotonic() < deadline:
        ready = wait(list(open_), timeout=max(0.0, deadline - time.monotonic()))
        for conn in cast(list[Connection], ready):  # wait() returns what it was given
            try:
                message = conn.recv()
            except (EOFError, OSError):
                del open_[conn]
                continue
            if message[0] == "done":
                open_.pop(conn).done = True
                on_done(message[1])


class _Engine:
    """A completer and its threads; results arrive on ``results`` in completion order."""

    def __init__(
        self,
        config: StoreConfig,
        bucket: str,
        threads: int,
        path: str,
        target: LightTarget | None = None,
        owner: Any = None,
    ) -> None:
        self.stats = RequestStats()
        self.completer = make_completer(config, bucket, path, self.stats, target, owner)
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="zero-rename-complete")
        self.results: queue.SimpleQueue[_Result] = queue.SimpleQueue()

    def submit(self, item: Item) -> None:
        self.pool.submit(self._complete, item)

    def _complete(self, item: Item) -> None:
        index, key, upload_id, parts = item
        try:
            outcome = self.completer.complete(key, upload_id, parts)
            self.results.put(Completion(index, key, outcome.etag, outcome.failure))
        except BaseException:
            self.results.put(_Error(traceback.format_exc()))

    def close(self, cancel: bool) -> None:
        """Wait for the requests in flight; with ``cancel``, drop those not yet started."""
        self.pool.shutdown(wait=True, cancel_futures=cancel)
        self.completer.close()


# -- the worker side -----------------------------------------------------------
_END_OF_RESULTS = _Error("end of results")  # compared by identity


def worker_main(conn: Connection) -> int:
    """A worker's life: set up, complete what the parent sends, report, exit."""
    # Ctrl-C reaches the whole process group; the parent decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    setup: _Setup = conn.recv()
    logging.basicConfig(
        level=logging.WARNING,
        format=(f"zero-rename complete worker {setup.number}: %(levelname)s %(name)s: %(message)s"),
    )
    try:
        engine = _Engine(setup.config, setup.bucket, setup.threads, setup.path, setup.target)
    except Exception:
        conn.send(("error", traceback.format_exc()))
        return 1
    sender = threading.Thread(
        target=_send_results, args=(engine.results, conn), name="zero-rename-results", daemon=True
    )
    sender.start()
    cancel = _serve(conn, engine)
    engine.close(cancel)
    engine.results.put(_END_OF_RESULTS)
    sender.join()
    try:
        conn.send(("done", engine.stats.snapshot()))
    except OSError:
        return 1  # the parent is gone
    return 0


def _serve(conn: Connection, engine: _Engine) -> bool:
    """Submit what the parent sends until it says "end" (False) or "stop", or
    goes away (True: drop what has not started)."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return True
        kind: str = message[0]
        if kind != "items":
            return kind != "end"  # "end" lets what was submitted finish
        for item in message[1]:
            engine.submit(item)


def _send_results(results: queue.SimpleQueue[_Result], conn: Connection) -> None:
    """Send results as they come, in batches of whatever has piled up meanwhile."""
    while True:
        batch = [results.get()]
        while len(batch) < RESULT_BATCH:
            try:
                batch.append(results.get_nowait())
            except queue.Empty:
                break
        last = batch[-1] is _END_OF_RESULTS
        if last:
            batch.pop()
        if batch:
            try:
                conn.send(("results", batch))
            except OSError:
                return  # the parent is gone; the reader sees it too
        if last:
            return
