"""The table formats' writes of their metadata that have ended in this process.

A write whose answer was lost can leave a multipart upload pending at its key
(the client started a second upload and finished that one; the first stays,
invisible and billed), and so can one that failed. A write that has ended, by
finishing or failing, will never complete anything more, and the format names
every metadata object by a fresh UUID, so a pending upload at such a key is
nobody's: the job's cleanup aborts it (:mod:`zero_rename.core.protocol.table_uploads`).

Kept per process, bounded, without any library of a format: the FileIO that
writes (:mod:`.iceberg_io`) notes each key here when its write ends, and the
cleanup takes the keys under its destination's format folder.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

# Keys kept at most; the oldest go first (a cleanup that never ran leaves them:
# then the age of their uploads is what ends them).
MAX_KEPT = 10_000

_lock = threading.Lock()
_ended: OrderedDict[tuple[str, str], None] = OrderedDict()


def note_ended(bucket: str, key: str) -> None:
    """A write of ``key`` has ended (finished or failed)."""
    with _lock:
        _ended[(bucket, key)] = None
        _ended.move_to_end((bucket, key))
        while len(_ended) > MAX_KEPT:
            _ended.popitem(last=False)


def take_ended(bucket: str, prefix: str) -> set[str]:
    """The keys under ``prefix`` whose writes have ended, forgotten here."""
    with _lock:
        taken = [k for k in _ended if k[0] == bucket and k[1].startswith(prefix)]
        for item in taken:
            del _ended[item]
    return {key for _, key in taken}
