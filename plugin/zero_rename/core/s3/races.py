"""Racing a store's conditional writes: does exactly one of many writers win?

A store can honour ``If-None-Match`` and ``If-Match`` one request at a time and
still let two racing writers both win, when it checks the condition and writes
in two steps without a lock (seaweedfs#8800 was such a bug in PutObject; moto
checks and writes that way too). One request at a time the probes cannot tell;
``zero-rename doctor`` races writers against each other, a few rounds each:

- ``create``: 16 PutObject ``If-None-Match: *`` on one new key. Two winners
  would be two processes both creating one job record, manifest or claim.
- ``swap``: 16 PutObject ``If-Match`` with the same ETag. Two winners would be
  a commit and an abort both deciding a job.
- ``complete``: 4 CompleteMultipartUpload ``If-None-Match: *`` to one new key.
  Reported only: the protocol never relies on conditional completes (every file
  name carries its job id).

A round breaks when more than one writer wins. A round with no winner (every
writer answered 409 ConditionalRequestConflict, as AWS may under contention)
breaks nothing: the protocol reads a 409 as a lost round and tries again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

from zero_rename.core.s3.client import S3Store
from zero_rename.core.s3.profiles import StoreProfile
from zero_rename.core.s3.progress import Advance, Steps, no_steps
from zero_rename.errors import ConditionalConflict, PreconditionFailed

# The doctor's rounds per race: each round of 16 racing writes to one key costs
# SeaweedFS 1 to 4 s (racing conditional writes wait on a per-key lock).
RACE_ROUNDS = 3
RaceName = Literal["create", "swap", "complete"]
RACERS: dict[RaceName, int] = {"create": 16, "swap": 16, "complete": 4}
# The racers of one round start together; a racer that never reaches the start
# (a thread that could not be started) fails the round rather than hang it.
_START_TIMEOUT = 60.0


@dataclass(frozen=True)
class Race:
    """``racers`` writers raced to one key in each round; ``winners`` per round."""

    name: RaceName
    racers: int
    winners: tuple[int, ...]

    @property
    def rounds(self) -> int:
        return len(self.winners)

    @property
    def broken(self) -> int:
        """Rounds with more than one winner."""
        return sum(w > 1 for w in self.winners)

    @property
    def atomic(self) -> bool:
        return self.broken == 0


def run_races(
    store: S3Store,
    profile: StoreProfile,
    bucket: str,
    prefix: str,
    rounds: int,
    steps: Steps = no_steps,
) -> list[Race]:
    """The races the store's profile makes meaningful, ``rounds`` each, under
    ``prefix`` (the caller removes what they leave: objects and pending uploads).
    ``store`` must send If-Match in the form ``profile`` names; ``steps`` shows
    each race's rounds (each takes seconds on some stores)."""
    if rounds < 1:
        return []
    wanted: list[tuple[RaceName, Writers, str]] = []
    if profile.conditional_create:
        wanted.append(("create", _create, "conditional creates"))
    if profile.conditional_replace and profile.if_match_form != "refused":
        wanted.append(("swap", _swap, "compare-and-swaps"))
    if profile.conditional_complete:
        wanted.append(("complete", _complete, "conditional completes"))
    races = []
    for name, writers, what in wanted:
        advance = steps(f"racing {RACERS[name]} {what}", rounds, "rounds")
        winners = _rounds(rounds, store, bucket, prefix, writers, advance)
        races.append(Race(name, RACERS[name], winners))
    return races


Writers = Callable[[S3Store, str, str], list[Callable[[], object]]]


def _rounds(
    rounds: int, store: S3Store, bucket: str, prefix: str, writers: Writers, advance: Advance
) -> tuple[int, ...]:
    name = writers.__name__.strip("_")
    winners = []
    for number in range(rounds):
        winners.append(race(writers(store, bucket, f"{prefix}{name}-{number}")))
        advance(1)
    return tuple(winners)


def race(writers: Sequence[Callable[[], object]]) -> int:
    """Run ``writers`` at once; how many succeeded. A 412 or 409 is a lost race;
    any other error is raised."""
    start = threading.Barrier(len(writers))

    def run(write: Callable[[], object]) -> bool:
        start.wait(_START_TIMEOUT)
        try:
            write()
        except (PreconditionFailed, ConditionalConflict):
            return False
        return True

    with ThreadPoolExecutor(len(writers), thread_name_prefix="store-race") as pool:
        return sum(pool.map(run, writers))


def _create(store: S3Store, bucket: str, key: str) -> list[Callable[[], object]]:
    def writer(n: int) -> Callable[[], object]:
        return lambda: store.put_object(bucket, key, b"%d" % n, if_none_match=True)

    return [writer(n) for n in range(RACERS["create"])]


def _swap(store: S3Store, bucket: str, key: str) -> list[Callable[[], object]]:
    etag = store.put_object(bucket, key, b"start")

    def writer(n: int) -> Callable[[], object]:
        return lambda: store.put_object(bucket, key, b"%d" % n, if_match=etag)

    return [writer(n) for n in range(RACERS["swap"])]


def _complete(store: S3Store, bucket: str, key: str) -> list[Callable[[], object]]:
    def writer(n: int) -> Callable[[], object]:
        upload_id = store.create_upload(bucket, key)
        parts = [(1, store.upload_part(bucket, key, upload_id, 1, b"%d" % n))]
        return lambda: store.complete_upload(bucket, key, upload_id, parts, if_none_match=True)

    return [writer(n) for n in range(RACERS["complete"])]
