"""Independent requests in one round trip.

Behind a store that answers in 20 to 50 ms (AWS), a step's time is its chain of
sequential round trips, not its requests: requests that need none of each
other's answers go out together (docs/architecture.md, "Round trips").
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def one_round(*calls: Callable[[], Any]) -> list[Any]:
    """Each call on a thread of its own (the last on this one); their values once
    all are done. Errors: the last call's first, then the others' in order, so a
    caller puts last the call whose failure explains the others' (a missing
    bucket before a missing key)."""
    if len(calls) == 1:
        return [calls[0]()]
    with ThreadPoolExecutor(len(calls) - 1) as pool:
        running = [pool.submit(call) for call in calls[:-1]]
        last = calls[-1]()
        return [*(r.result() for r in running), last]
