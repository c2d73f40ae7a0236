"""Conditional writes that are safe to retry after a lost response.

Every object the protocol publishes is created once (If-None-Match) or
advanced by compare-and-swap (If-Match). Either can fail in three ways, and
they call for different answers:

- 412 PreconditionFailed: the condition did not hold. For a create, the key
  exists: it may hold our own body, written by an earlier try whose response
  was lost (botocore retries a dropped connection by itself, and the retry then
  meets our own write), so it is read back before anything is concluded.
- 409 ConditionalRequestConflict (AWS): the write raced another operation on
  the key and did not take effect; retry it.
- no answer or a 5xx: the outcome is unknown; read back, never guess.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from zero_rename.core.s3.backoff import backoff
from zero_rename.core.s3.client import S3Store
from zero_rename.errors import ConditionalConflict, ContentionError, PreconditionFailed, StoreError

log = logging.getLogger(__name__)

# Rounds of put-then-read-back before an unknown outcome is given up on.
CREATE_ROUNDS = 5


def create_once(
    store: S3Store, bucket: str, key: str, body: bytes, content_type: str = "application/json"
) -> bytes | None:
    """Create ``key`` holding ``body`` unless it exists.

    Returns None when the key now holds ``body`` (written by this call or by
    an earlier one whose response was lost), or the other body the key holds.

    Raises:
        StoreError: the outcome stayed unknown, or the store refused the write.
    """
    unknown: StoreError | None = None
    for round_number in range(CREATE_ROUNDS):
        try:
            store.put_object(bucket, key, body, if_none_match=True, content_type=content_type)
            return None
        except ConditionalConflict:
            backoff(round_number)
            continue
        except PreconditionFailed:
            pass
        except StoreError as exc:
            if not exc.outcome_unknown:
                raise
            unknown = exc
            log.info(
                "create of s3://%s/%s: outcome unknown (%s); reading it back", bucket, key, exc
            )
        found = store.get_object(bucket, key)
        if found is None:
            backoff(round_number)  # not there (yet): put it again
            continue
        return None if found[0] == body else found[0]
    raise unknown or StoreError(
        f"create of s3://{bucket}/{key} kept conflicting; gave up after {CREATE_ROUNDS} rounds",
        operation="PutObject",
    )


def put_checked(
    store: S3Store, bucket: str, key: str, body: bytes, content_type: str = "application/json"
) -> None:
    """An unconditional PUT (``_SUCCESS``) whose lost answer is read back, and which
    is sent again if it did not land: a plain overwrite is safe to repeat."""
    for round_number in range(CREATE_ROUNDS):
        try:
            store.put_object(bucket, key, body, content_type=content_type)
            return
        except StoreError as exc:
            if not exc.outcome_unknown or round_number == CREATE_ROUNDS - 1:
                raise
            found = store.get_object(bucket, key)
            if found is not None and found[0] == body:
                return
            backoff(round_number)


# Compare-and-swap rounds before giving up; each lost round means another
# process changed the object, which in this protocol happens a handful of
# times at most (a commit racing an abort, step timings, claims of a few jobs).
SWAP_ROUNDS = 20


# An object's bytes and ETag as seen; (None, None): seen to be missing.
Version = tuple[bytes, str] | tuple[None, None]


@dataclass(frozen=True)
class Swapped:
    """What a compare-and-swap left: the object's bytes (None: no object), whether
    this call wrote them, and their ETag where known (None after a create, whose
    answer carries none here), for the next swap to start from."""

    data: bytes | None
    wrote: bool
    etag: str | None


def swap(
    store: S3Store,
    bucket: str,
    key: str,
    change: Callable[[bytes | None], bytes | None],
    what: str,
    rounds: int = SWAP_ROUNDS,
    writer: Callable[[], S3Store] | None = None,
    known: Version | None = None,
) -> Swapped:
    """Apply ``change`` to the object by compare-and-swap: ``If-Match`` on the ETag
    just read, or ``If-None-Match`` where there is no object yet. ``change`` gets
    the current bytes (None: no object) and returns the new ones, or None for no
    change; it may raise, and must be safe to call again on newer bytes, since a
    lost round calls it afresh on what the other process wrote. An outcome left
    unknown is read back: if the object holds what was written, it took effect.
    ``writer``, called after ``change``, gives the store the write goes through
    (one whose profile sends the ETag in the form the store accepts). ``known``:
    the bytes and ETag this process last saw (``(None, None)``: no object), for a
    first round without a read (a round trip less; if they are stale the write
    loses and the next round reads).

    Raises:
        ContentionError: the object changed under every one of ``rounds`` rounds.
    """
    round_number = 0
    while round_number < rounds:
        # The first try may go on what this process last saw; it is no round of
        # its own, since all it can cost is the read every round makes anyway.
        assumed, known = known, None
        found: Version | None = assumed if assumed is not None else store.get_object(bucket, key)
        current, etag = found if found is not None else (None, None)
        try:
            new = change(current)
        except Exception:
            if assumed is not None:
                continue  # a refusal is decided on what S3 holds, not on a memory
            raise
        if new is None:
            if assumed is not None:
                continue  # so is "nothing to do"
            return Swapped(current, False, etag)
        written = _swapped(writer() if writer else store, bucket, key, new, etag)
        if written is not None:
            return Swapped(new, True, written or None)
        log.info("%s changed underneath; reading it again", what)
        if assumed is None:
            backoff(round_number)
            round_number += 1
    raise ContentionError(f"{what} kept changing; gave up after {rounds} rounds")


def _swapped(store: S3Store, bucket: str, key: str, body: bytes, etag: str | None) -> str | None:
    """One conditional write: the new ETag ("" where unknown), or None for a lost round.
    Where there is no object yet, a create (If-None-Match): one that meets an object
    (another process's, or this one's own whose answer was lost) loses the round,
    and the next round reads what is there."""
    try:
        if etag is None:
            return store.put_object(bucket, key, body, if_none_match=True) or ""
        return store.put_object(bucket, key, body, if_match=etag)
    except (PreconditionFailed, ConditionalConflict):
        return None
    except StoreError as exc:
        if not exc.outcome_unknown:
            raise
        found = store.get_object(bucket, key)
        return found[1] if found is not None and found[0] == body else None
